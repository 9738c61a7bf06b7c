package main

import (
	"errors"
	"net/http"
	"sync/atomic"
	"syscall"
)

// listening is a readiness check that passes once a server has bound its
// socket. The manager starts its probe server and its metrics server side
// by side, and the secure metrics server first makes its self-signed
// certificate, so the pod would otherwise be ready while a scrape of its
// metrics port is still refused.
//
// Its control hook goes into the server's net.ListenConfig, which calls it
// on the new socket right before bind and listen. A bind that fails there
// stops the manager, so the check never stays passed for a server that
// does not listen.
type listening struct {
	what  string
	bound atomic.Bool
}

func (l *listening) control(_, _ string, _ syscall.RawConn) error {
	l.bound.Store(true)
	return nil
}

func (l *listening) check(*http.Request) error {
	if !l.bound.Load() {
		return errors.New(l.what + " is not listening yet")
	}
	return nil
}
