package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/modelserver-dev/modelserver-operator/test/machine"
	"github.com/modelserver-dev/modelserver-operator/test/s3server"
)

// bucket holds every shape, each under a prefix named after it.
const bucket = "bench"

// keepAliveEnv is versitygw's --keep-alive, by its environment variable.
const keepAliveEnv = "VGW_KEEP_ALIVE=true"

// server is a versitygw serving on loopback.
type server struct {
	Endpoint string
	Creds    s3server.Credentials
	cmd      *exec.Cmd
	exited   chan struct{} // closed once it exited, waitErr set
	waitErr  error
}

// startServer runs binary as a versitygw with random keys on a free
// loopback port, its data in dataDir and its output in logPath.
func startServer(ctx context.Context, binary, dataDir, logPath string) (*server, error) {
	if err := s3server.PrepareDataDir(dataDir); err != nil {
		return nil, err
	}
	addr, err := s3server.FreeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer func() { _ = logFile.Close() }()
	s := &server{Endpoint: "http://" + addr, Creds: s3server.NewCredentials(), exited: make(chan struct{})}
	args, env := s3server.Command(binary, addr, dataDir, s.Creds)
	// versitygw closes the connection after every response unless told
	// otherwise; S3 keeps it open, and every client here reuses it.
	env = append(env, keepAliveEnv)
	s.cmd = exec.Command(args[0], args[1:]...)
	s.cmd.Env = append(os.Environ(), env...)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	// Its own process group: a Ctrl-C at the terminal reaches the harness
	// alone, which then stops the server itself.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", binary, err)
	}
	go func() { s.waitErr = s.cmd.Wait(); close(s.exited) }()
	readyCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ready := make(chan error, 1)
	go func() { ready <- s3server.WaitReady(readyCtx, s.Endpoint) }()
	select {
	case err := <-ready:
		if err != nil {
			s.stop()
			return nil, fmt.Errorf("versitygw (log: %s): %w", logPath, err)
		}
	case <-s.exited:
		return nil, fmt.Errorf("versitygw exited at start (log: %s): %v", logPath, s.waitErr)
	}
	return s, nil
}

// cpuSeconds is the CPU time the server has used since it started.
func (s *server) cpuSeconds() (float64, error) {
	return machine.ProcessCPUSeconds(s.cmd.Process.Pid)
}

// stop ends the server and waits for it.
func (s *server) stop() {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.exited
	}
}

// upload writes each file of sh below scratch, uploads it as
// bucket/<shape>/<path> and removes it again, and returns what every file
// must be once fetched.
func (s *server) upload(ctx context.Context, sh shape, scratch string) (map[string]fileSum, error) {
	client := s3server.Client(s.Endpoint, s.Creds)
	if err := s3server.CreateBucket(ctx, client, bucket); err != nil {
		return nil, err
	}
	sums := make([]fileSum, len(sh.Files))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, f := range sh.Files {
		g.Go(func() error {
			sum, err := writeFile(scratch, sh.Name, f)
			if err != nil {
				return err
			}
			p := filepath.Join(scratch, filepath.FromSlash(f.Path))
			if err := s3server.UploadFile(gctx, client, bucket, sh.Name+"/"+f.Path, p); err != nil {
				return err
			}
			sums[i] = sum
			return os.Remove(p)
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	want := make(map[string]fileSum, len(sh.Files))
	for i, f := range sh.Files {
		want[f.Path] = sums[i]
	}
	return want, nil
}
