package azblobserver

import "testing"

// Serve starts a Server for the test t on addr, over TLS if useTLS, and
// closes it when the test ends.
func Serve(t testing.TB, addr, account string, useTLS bool) *Server {
	t.Helper()
	start := Start
	if useTLS {
		start = StartTLS
	}
	s, err := start(addr, account)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// ServeIdentity starts an Identity for the test t on addr, and closes it
// when the test ends.
func ServeIdentity(t testing.TB, addr string, issue func(TokenRequest) (Token, error)) *Identity {
	t.Helper()
	id, err := StartIdentity(addr, issue)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(id.Close)
	return id
}
