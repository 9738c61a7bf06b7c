// Command tfservingdouble is a test double for TensorFlow Serving's
// tensorflow_model_server: it takes the same flags and config files,
// finds and "loads" model versions on disk the same way and answers the
// REST status, metadata and metrics APIs in the same shapes, so that
// end-to-end tests can exercise the operator's contract with TF Serving
// on a real node without the real image. See README.md for what it does
// not do.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// version is what --version prints: not a TF Serving version, so that
// nothing mistakes the double for the real server.
const version = "0.0.0-tfservingdouble (a test double, not TensorFlow Serving)"

// bindHost is the host the ports listen on; tests narrow it to loopback.
var bindHost = ""

// sigtermEnv chooses what SIGTERM does. By default the double finishes
// in-flight requests and exits 0. "real" mimics tensorflow_model_server,
// which installs no SIGTERM handler: as PID 1 of a container it ignores
// SIGTERM and is killed at the end of the grace period; otherwise it dies
// at once.
const sigtermEnv = "TFSERVINGDOUBLE_SIGTERM"

// loadSecondsEnv, if set to a number of seconds, makes the first load of
// the models take that much longer: the double's models load at once, a
// large TF Serving model's take minutes, with the ports closed all along.
const loadSecondsEnv = "TFSERVINGDOUBLE_LOAD_SECONDS"

// grpcClosesEnv, if set to a number of seconds, closes the gRPC port that
// long after it opened, while the process and its REST port live on: a
// server whose gRPC side has died, which only the liveness probe (TCP on
// that port) notices, and for which the kubelet kills the container.
const grpcClosesEnv = "TFSERVINGDOUBLE_GRPC_CLOSES_SECONDS"

func main() {
	ctx, stop := shutdownContext(os.Getenv(sigtermEnv), os.Getpid())
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func shutdownContext(mode string, pid int) (context.Context, context.CancelFunc) {
	if mode == "real" {
		if pid == 1 {
			signal.Ignore(syscall.SIGTERM)
		}
		return context.WithCancel(context.Background())
	}
	return signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
}

// run is the whole program: its exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, err := parseFlags(args)
	var fe *flagError
	switch {
	case errors.As(err, &fe) && fe.showUsage:
		if fe.msg != "" {
			_, _ = fmt.Fprintln(stderr, fe.msg)
		}
		_, _ = fmt.Fprint(stdout, usage())
		return 255
	case err != nil:
		_, _ = fmt.Fprintln(stderr, err)
		return 1
	}
	opts := f.options()
	if opts.version {
		_, _ = fmt.Fprintf(stdout, "TensorFlow ModelServer: %s\nTensorFlow Library: none\n", version)
		return 0
	}
	for _, e := range []struct {
		name string
		to   *time.Duration
	}{{loadSecondsEnv, &opts.extraLoad}, {grpcClosesEnv, &opts.grpcCloses}} {
		v := os.Getenv(e.name)
		if v == "" {
			continue
		}
		secs, err := strconv.ParseFloat(v, 64)
		if err != nil || secs < 0 {
			_, _ = fmt.Fprintf(stderr, "%s=%q: want a number of seconds\n", e.name, v)
			return 1
		}
		*e.to = time.Duration(secs * float64(time.Second))
	}
	log := newLogger(stderr)
	s, err := start(ctx, opts, log)
	if err != nil {
		if ctx.Err() != nil {
			log.infof("Shutting down before the models were loaded.")
			return 0
		}
		// Where TF Serving reports it, and with its exit code.
		_, _ = fmt.Fprintf(stdout, "Failed to start server. Error: %v\n", err)
		return 255
	}
	<-ctx.Done()
	log.infof("Received a termination signal: finishing in-flight requests, then exiting.")
	s.stop()
	return 0
}

// server is a started double.
type server struct {
	log   *logger
	core  *core
	http  *http.Server
	grpc  []net.Listener
	tasks sync.WaitGroup
	// cancel stops the pollers.
	cancel context.CancelFunc
	// restAddr and grpcAddr are the bound addresses, for tests.
	restAddr, grpcAddr string
}

// start does what TF Serving's Server::BuildAndStart does, in its order:
// check the options, read the model config, load the models (waiting for
// them), start polling, then open the gRPC port and the REST port. The
// ports therefore stay closed until the models are AVAILABLE.
func start(ctx context.Context, opts options, log *logger) (*server, error) {
	cfg, err := configure(opts, log)
	if err != nil {
		return nil, err
	}

	met := newMetrics()
	s := &server{log: log, core: newCore(log, met, opts.allowUnavailableLabels)}
	bg, cancel := context.WithCancel(ctx)
	fail := func(err error) (*server, error) {
		cancel()
		for _, l := range s.grpc {
			_ = l.Close()
		}
		s.tasks.Wait()
		return nil, err
	}
	s.spawn(func() { s.core.runSource(bg, time.Duration(opts.fsPollSeconds)*time.Second) })
	if err := s.core.reloadConfig(ctx, cfg); err != nil {
		return fail(err)
	}
	if opts.extraLoad > 0 {
		select {
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-time.After(opts.extraLoad):
		}
	}
	if opts.modelConfigFile != "" && opts.configPollSeconds > 0 {
		every := time.Duration(opts.configPollSeconds) * time.Second
		s.spawn(func() { s.pollModelConfig(bg, opts.modelConfigFile, every) })
	}

	if err := s.openGRPC(opts); err != nil {
		return fail(err)
	}
	for _, l := range s.grpc {
		s.spawn(func() { acceptAndClose(l) })
	}
	if opts.grpcCloses > 0 && len(s.grpc) > 0 {
		s.spawn(func() { s.closeGRPC(bg, opts.grpcCloses) })
	}

	if opts.restPort != 0 && opts.restPort == opts.grpcPort {
		log.errorf("server_options.http_port cannot be same as grpc_port. Please use a different port for HTTP/REST API. Skipped exporting HTTP/REST API.")
	} else if opts.restPort != 0 {
		api := &restAPI{core: s.core, metrics: met, cors: opts.cors}
		if opts.monitoringFile != "" {
			p, err := readMonitoringConfig(opts.monitoringFile)
			if err != nil {
				return fail(err)
			}
			api.metricsPath = p
		}
		// A REST port that cannot be bound is logged, not fatal, as in TF
		// Serving: the server runs on without its REST API.
		if l, err := net.Listen("tcp", fmt.Sprintf("%s:%d", bindHost, opts.restPort)); err != nil {
			log.errorf("Failed to start HTTP Server at localhost:%d: %v", opts.restPort, err)
		} else {
			s.http = &http.Server{Handler: api, ReadHeaderTimeout: time.Minute}
			s.restAddr = l.Addr().String()
			s.spawn(func() { _ = s.http.Serve(l) })
			log.infof("Exporting HTTP/REST API at:localhost:%d ...", opts.restPort)
		}
	}
	s.cancel = cancel
	return s, nil
}

// configure checks the options and reads the files they name (the model
// config and the batching parameters), as BuildAndStart does before it
// starts anything.
func configure(opts options, log *logger) (serverConfig, error) {
	switch {
	case opts.grpcPort == 0 && opts.grpcSocketPath == "":
		return serverConfig{}, errorf(codeInvalidArgument, "At least one of server_options.grpc_port or server_options.grpc_socket_path must be set.")
	case opts.useALTS && opts.sslConfigFile != "":
		return serverConfig{}, errorf(codeInvalidArgument, "Either use_alts_credentials must be false or ssl_config_file must be empty.")
	case opts.modelBasePath == "" && opts.modelConfigFile == "":
		return serverConfig{}, errorf(codeInvalidArgument, "Both server_options.model_base_path and server_options.model_config_file are empty!")
	}
	var cfg serverConfig
	if opts.modelConfigFile == "" {
		log.infof("Building single TensorFlow model file config:  model_name: %s model_base_path: %s", opts.modelName, opts.modelBasePath)
		cfg = singleModelConfig(opts.modelName, opts.modelBasePath)
	} else {
		log.infof("Reading model config file %s", opts.modelConfigFile)
		var err error
		if cfg, err = readModelServerConfig(opts.modelConfigFile); err != nil {
			return serverConfig{}, err
		}
	}
	if opts.enableBatching {
		if opts.batchingFile != "" {
			if err := readBatchingParameters(opts.batchingFile); err != nil {
				return serverConfig{}, err
			}
		}
	} else if opts.batchingFile != "" {
		return serverConfig{}, errorf(codeInvalidArgument, "server_options.batching_parameters_file is set without setting server_options.enable_batching to true.")
	}
	if opts.intraOpParallelism > 0 && opts.interOpParallelism > 0 && opts.sessionParallelism > 0 {
		return serverConfig{}, errorf(codeInvalidArgument, "Either configure server_options.tensorflow_session_parallelism or (server_options.tensorflow_intra_op_parallelism, server_options.tensorflow_inter_op_parallelism) separately. You cannot configure all.")
	}
	return cfg, nil
}

// openGRPC opens the gRPC port and socket, over TLS where an SSL config is
// given.
func (s *server) openGRPC(opts options) error {
	if opts.grpcPort != 0 {
		// TF Serving reads its SSL config as it opens the port, once the
		// models are loaded.
		var creds *tls.Config
		if opts.sslConfigFile != "" {
			var err error
			if creds, err = readSSLConfig(opts.sslConfigFile, s.log); err != nil {
				return err
			}
		}
		l, err := net.Listen("tcp", fmt.Sprintf("%s:%d", bindHost, opts.grpcPort))
		if err != nil {
			s.log.errorf("Failed to listen on the gRPC port: %v", err)
			return errorf(codeInvalidArgument, "Failed to BuildAndStart gRPC server")
		}
		if creds != nil {
			l = tls.NewListener(l, creds)
		}
		s.grpc, s.grpcAddr = append(s.grpc, l), l.Addr().String()
		s.log.infof("Running gRPC ModelServer at 0.0.0.0:%d ...", opts.grpcPort)
	}
	if opts.grpcSocketPath != "" {
		l, err := net.Listen("unix", opts.grpcSocketPath)
		if err != nil {
			s.log.errorf("Failed to listen on %s: %v", opts.grpcSocketPath, err)
			return errorf(codeInvalidArgument, "Failed to BuildAndStart gRPC server")
		}
		s.grpc = append(s.grpc, l)
		s.log.infof("Running gRPC ModelServer at UNIX socket %s ...", opts.grpcSocketPath)
	}
	return nil
}

func (s *server) spawn(f func()) {
	s.tasks.Add(1)
	go func() {
		defer s.tasks.Done()
		f()
	}()
}

// stop drains the REST server (in-flight requests finish), closes the
// gRPC port and stops the pollers.
func (s *server) stop() {
	s.cancel()
	if s.http != nil {
		_ = s.http.Shutdown(context.Background())
	}
	for _, l := range s.grpc {
		_ = l.Close()
	}
	s.tasks.Wait()
}

// closeGRPC closes the gRPC listeners after d, unless the server stops
// first.
func (s *server) closeGRPC(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(d):
	}
	s.log.errorf("The gRPC server stopped (%s); the REST API still answers.", grpcClosesEnv)
	for _, l := range s.grpc {
		_ = l.Close()
	}
}

// pollModelConfig re-reads the model config file. A file that cannot be
// read or parsed, or a config TF Serving would refuse, is logged and the
// models keep running on the previous config.
func (s *server) pollModelConfig(ctx context.Context, path string, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.reloadModelConfig(ctx, path)
	}
}

func (s *server) reloadModelConfig(ctx context.Context, path string) {
	cfg, err := readModelServerConfig(path)
	if err != nil {
		s.log.errorf("Failed to read ModelServerConfig file: %s", messageOf(err))
		return
	}
	if err := s.core.reloadConfig(ctx, cfg); err != nil && ctx.Err() == nil {
		s.log.errorf("PollFilesystemAndReloadConfig failed to ReloadConfig: %s", messageOf(err))
	}
}

// acceptAndClose is the gRPC port: the double does not speak gRPC, but a
// TCP probe (the liveness probe) connects, and a gRPC client fails fast
// instead of hanging; over TLS, after the handshake.
func acceptAndClose(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go handshakeAndClose(c)
	}
}
