package s3server

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
)

// BinaryEnv names a versitygw binary to use instead of bin/versitygw.
const BinaryEnv = "VERSITYGW_BIN"

// Binary returns the versitygw binary ($VERSITYGW_BIN, or bin/versitygw at
// the repository root), or skips the test when there is none: a checkout
// that has not run `make tools` still passes its other tests.
func Binary(t testing.TB) string {
	t.Helper()
	p := os.Getenv(BinaryEnv)
	if p == "" {
		root, err := localcluster.RepositoryRoot()
		if err != nil {
			t.Fatal(err)
		}
		p = filepath.Join(root, "bin", "versitygw")
	}
	if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode().Perm()&0o111 == 0 {
		t.Skipf("no versitygw binary at %s ($%s names another): `make tools` builds bin/versitygw", p, BinaryEnv)
	}
	return p
}

// Server is a versitygw started by Start for one test.
type Server struct {
	// Endpoint is its URL, "http://127.0.0.1:<port>".
	Endpoint string
	Creds    Credentials
	// DataDir is what it serves (see RootDir).
	DataDir string
	// LogFile holds its output; the test prints it if it failed.
	LogFile string
	// Client is an S3 client with the root account's keys.
	Client *s3.Client

	cmd    *exec.Cmd
	exited chan struct{}
	err    error // how it exited; set before exited is closed
}

// Start runs binary as a versitygw with fresh random keys on an empty data
// directory and a free local port, waits until it serves, and stops it when
// the test ends, printing its log if the test failed.
func Start(t testing.TB, binary string) *Server {
	t.Helper()
	dataDir := t.TempDir()
	if err := PrepareDataDir(dataDir); err != nil {
		t.Fatal(err)
	}
	logDir := t.TempDir()
	creds := NewCredentials()
	// The port is free when chosen but may be taken before versitygw binds
	// it; a server that exits at once is started again on another.
	var lastErr error
	for attempt := 1; attempt <= 3; attempt++ {
		addr, err := FreeLoopbackAddr()
		if err != nil {
			t.Fatal(err)
		}
		s := &Server{
			Endpoint: "http://" + addr,
			Creds:    creds,
			DataDir:  dataDir,
			LogFile:  filepath.Join(logDir, fmt.Sprintf("versitygw-%d.log", attempt)),
		}
		if err := s.start(binary, addr); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			s.stop(5 * time.Second)
			if t.Failed() {
				t.Logf("versitygw log (%s):\n%s", s.LogFile, readLog(s.LogFile))
			}
		})
		if lastErr = s.waitReady(30 * time.Second); lastErr == nil {
			s.Client = Client(s.Endpoint, creds)
			return s
		}
		if !s.running() && strings.Contains(readLog(s.LogFile), "address already in use") {
			continue
		}
		break
	}
	t.Fatalf("versitygw did not start: %v", lastErr)
	return nil
}

func (s *Server) start(binary, addr string) error {
	args, env := Command(binary, addr, s.DataDir, s.Creds)
	out, err := os.Create(s.LogFile)
	if err != nil {
		return err
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(hermeticEnv(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Pdeathsig fires when the forking thread exits; the Go runtime
		// keeps its threads for the life of the process unless a goroutine
		// exits locked to one, which no test here does. So a test binary
		// that dies (a timeout's panic) takes the server with it.
		Pdeathsig: syscall.SIGKILL,
		// Its own process group: a terminal's Ctrl-C reaches the test
		// binary, whose cleanup then stops the server.
		Setpgid: true,
	}
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		return fmt.Errorf("start %s: %w", binary, err)
	}
	s.cmd = cmd
	s.exited = make(chan struct{})
	go func() {
		s.err = cmd.Wait()
		_ = out.Close()
		close(s.exited)
	}()
	return nil
}

// hermeticEnv is this process's environment without the variables versitygw
// reads for its settings: a developer's VGW_IAM_DIR or ROOT_ACCESS_KEY must
// not change the server a test runs against.
func hermeticEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "VGW_") || strings.HasPrefix(kv, "ROOT_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func (s *Server) waitReady(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// A server that exits (a bad flag, a taken port) fails at once rather
	// than after the whole timeout.
	go func() {
		select {
		case <-s.exited:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := WaitReady(ctx, s.Endpoint)
	if err != nil && !s.running() {
		return fmt.Errorf("versitygw exited (%v); its log:\n%s", s.err, readLog(s.LogFile))
	}
	return err
}

func (s *Server) running() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM to the server's process group, and SIGKILL if it has
// not exited within grace.
func (s *Server) stop(grace time.Duration) {
	if !s.running() {
		return
	}
	pgid := s.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-s.exited
	}
}

// FreeLoopbackAddr is a loopback TCP address nothing listens on at the
// moment.
func FreeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

func readLog(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
