package localcluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// A real node's pods and shims are not this process's children, so
// Pdeathsig cannot take them down with it. The reaper is a copy of this
// binary, started in a session of its own, that waits for its stdin (a pipe
// whose other end only this process holds) to close, and then tears the
// node down. Stop closes the pipe and waits; a killed owner closes it by
// dying. The reaper also holds the real-node lock, so the next real node
// starts only once the host is clean.

const (
	reaperEnv    = "LOCALCLUSTER_REAPER_DIR"
	reaperLogEnv = "LOCALCLUSTER_REAPER_LOG"
)

func init() {
	if dir := os.Getenv(reaperEnv); dir != "" {
		os.Exit(runReaper(dir))
	}
}

func runReaper(dir string) int {
	// Ctrl-C in a terminal and the owner's own signals are not for the
	// reaper: it must outlive them to clean up.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	_, _ = io.Copy(io.Discard, os.Stdin)
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, time.Now().Format(time.RFC3339)+" "+format+"\n", args...)
	}
	logf("owner gone or stopping: tearing the real node down")
	if err := teardownHost(dir, logf); err != nil {
		logf("teardown incomplete: %v", err)
		return 1
	}
	if os.Getenv("LOCALCLUSTER_KEEP") == "" {
		if err := os.RemoveAll(dir); err != nil {
			logf("remove %s: %v", dir, err)
			return 1
		}
	}
	logf("teardown complete")
	// A clean teardown's log says nothing worth keeping.
	if log := os.Getenv(reaperLogEnv); log != "" {
		_ = os.Remove(log)
	}
	return 0
}

type reaper struct {
	cmd  *exec.Cmd
	pipe *os.File
	done chan struct{}
	log  string
	err  error
}

// startReaper starts the reaper for dir, handing it the lock file so that
// the lock is held until the host is clean.
func startReaper(dir string, lock *os.File) (*reaper, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	logFile := filepath.Join(clustersRoot(), filepath.Base(dir)+"-reaper.log")
	out, err := os.Create(logFile)
	if err != nil {
		_ = r.Close()
		_ = w.Close()
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), reaperEnv+"="+dir, reaperLogEnv+"="+logFile)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = r, out, out
	cmd.ExtraFiles = []*os.File{lock}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	_ = r.Close()
	_ = out.Close()
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("start the real node's reaper: %w", err)
	}
	rp := &reaper{cmd: cmd, pipe: w, done: make(chan struct{}), log: logFile}
	go func() {
		rp.err = cmd.Wait()
		close(rp.done)
	}()
	return rp, nil
}

// finish asks the reaper to tear down and waits for it. The reaper's log is removed when it reported a clean host.
func (r *reaper) finish(timeout time.Duration) error {
	_ = r.pipe.Close()
	select {
	case <-r.done:
	case <-time.After(timeout):
		return fmt.Errorf("the real node's teardown did not finish within %s; see %s", timeout, r.log)
	}
	if r.err != nil {
		return fmt.Errorf("the real node's teardown failed (%v): %s", r.err, tail(r.log, 20))
	}
	_ = os.Remove(r.log)
	return nil
}

// realNodeLockPath is machine-wide: kubelet's ports and iptables chains,
// kube-proxy's rules and the bridge's addresses are global, so two real
// nodes (say, two test packages run in parallel) take turns.
func realNodeLockPath() string { return filepath.Join(clustersRoot(), "realnode.lock") }

func acquireRealNodeLock(ctx context.Context, logf func(string, ...any)) (*os.File, error) {
	if err := os.MkdirAll(clustersRoot(), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(realNodeLockPath(), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	var waitingSince time.Time
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			// The wait is not this node's start-up time: say how long it was.
			if !waitingSince.IsZero() {
				logf("the other real node stopped after %s", time.Since(waitingSince).Round(100*time.Millisecond))
			}
			return f, nil
		}
		if err != syscall.EWOULDBLOCK {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", realNodeLockPath(), err)
		}
		if waitingSince.IsZero() {
			logf("another real node runs on this machine; waiting for it to stop")
			waitingSince = time.Now()
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("waiting for another real node on this machine to stop: %w", ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// HoldRealNodeLock waits until no real node runs on this machine (and the
// last one's teardown is done), and keeps others from starting until
// release is called: for a test that inspects the host in between.
func HoldRealNodeLock(ctx context.Context) (release func(), err error) {
	f, err := acquireRealNodeLock(ctx, func(string, ...any) {})
	if err != nil {
		return nil, err
	}
	return func() { _ = f.Close() }, nil
}
