package localcluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is a program running as a child of this process: a control-plane
// component, or a program under test started with Cluster.StartProcess.
type Process struct {
	name    string
	cmd     *exec.Cmd
	logFile string
	exited  chan struct{}
	err     error // set before exited is closed
}

// spawner starts every child from one goroutine locked to its OS thread.
// Pdeathsig is delivered when the thread that forked the child exits, not the
// process, so children forked from an arbitrary goroutine's thread could be
// killed whenever the Go runtime retires that thread. A thread that never
// exits makes Pdeathsig mean "when this test binary dies", which is what
// keeps a panicking or timed-out test from leaving etcd and kube-* behind.
var spawner struct {
	once sync.Once
	reqs chan spawnRequest
}

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

func spawn(cmd *exec.Cmd) error {
	spawner.once.Do(func() {
		spawner.reqs = make(chan spawnRequest)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread must outlive every child
			for r := range spawner.reqs {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	spawner.reqs <- spawnRequest{cmd: cmd, done: done}
	return <-done
}

// startProcess runs binary with args, its output going to logDir/name.log and
// its pid recorded in pidDir so that a later sweep can find it if this
// process is killed before it can stop its children.
func startProcess(name, binary string, args []string, env []string, logDir, pidDir string) (*Process, error) {
	logFile := filepath.Join(logDir, name+".log")
	out, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Pdeathsig: syscall.SIGKILL,
		// A group of its own: a terminal's Ctrl-C reaches only the test
		// binary, which then stops the components in order.
		Setpgid: true,
	}
	if err := spawn(cmd); err != nil {
		_ = out.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{name: name, cmd: cmd, logFile: logFile, exited: make(chan struct{})}
	_ = os.WriteFile(filepath.Join(pidDir, name+".pid"), []byte(fmt.Sprint(cmd.Process.Pid)), 0o600)
	go func() {
		p.err = cmd.Wait()
		_ = out.Close()
		close(p.exited)
	}()
	return p, nil
}

// Pid is the process's id, for reading its CPU time and memory from /proc.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// LogFile is where the process's stdout and stderr go.
func (p *Process) LogFile() string { return p.logFile }

// Exited is closed once the process has exited and been reaped.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Err is the process's exit error (nil for exit code 0), valid once Exited
// is closed.
func (p *Process) Err() error { return p.err }

// LogTail is the last lines of the process's log.
func (p *Process) LogTail(lines int) string { return tail(p.logFile, lines) }

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

func (p *Process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Stop asks the process (and its process group) to shut down with SIGTERM
// and kills it if it has not exited within grace. It returns once the
// process has been reaped.
func (p *Process) Stop(grace time.Duration) {
	if !p.running() {
		return
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.exited
	}
}

// exitError describes how the process ended, with the tail of its log.
func (p *Process) exitError() error {
	return fmt.Errorf("%s exited (%v); last lines of %s:\n%s", p.name, p.err, p.logFile, tail(p.logFile, 20))
}

func tail(file string, lines int) string {
	data, err := os.ReadFile(file)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// killRecorded kills the processes whose pids were recorded in pidDir by a
// test binary that is gone, if they are still alive and still belong to
// that cluster (their command line names the cluster's directory, which
// guards against a recycled pid).
func killRecorded(pidDir, clusterDir string) {
	entries, err := os.ReadDir(pidDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(pidDir, e.Name()))
		if err != nil {
			continue
		}
		var pid int
		if _, err := fmt.Sscan(string(raw), &pid); err != nil || pid <= 1 {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !bytes.Contains(cmdline, []byte(clusterDir)) {
			continue
		}
		if err := syscall.Kill(-pid, syscall.SIGKILL); errors.Is(err, syscall.ESRCH) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
