//go:build linux

// Command pause is a pod sandbox's pause process: it holds the pod's
// namespaces open by doing nothing until it is told to stop. As pid 1 of a
// pod that shares its process namespace, it also reaps the processes that
// are orphaned to it, which no one else would wait for.
package main

import (
	"errors"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 16)
	// A pid 1 gets no signal whose action is the default, so without a
	// handler SIGTERM would not stop it.
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	reaper := os.Getpid() == 1
	if reaper {
		signal.Notify(signals, syscall.SIGCHLD)
		// Children may have exited before the handler was in place.
		reap()
	}
	for sig := range signals {
		if sig == syscall.SIGCHLD {
			reap()
			continue
		}
		os.Exit(0)
	}
}

// reap waits for every exited child without blocking: one SIGCHLD may
// stand for several exits.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
