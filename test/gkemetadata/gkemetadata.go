// Package gkemetadata is a stand-in for GKE's metadata server, as a pod
// with Workload Identity Federation for GKE reaches it: the default
// service account's email and access token, asked for with the header
// Metadata-Flavor: Google and answered with it. As the real server, it
// knows the caller by its address alone; its user decides who that is
// (for a real pod: the pod with that IP, its service account and the
// Google service account it is annotated with).
package gkemetadata

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// Identity is what the server gives a caller: the email it answers as
// (a Google service account's, or <project>.svc.id.goog for a Kubernetes
// service account's principal) and its access token.
type Identity struct {
	Email, Token string
	ExpiresIn    time.Duration
}

// Refusal is the server's answer instead of an identity: its status and
// text, as GKE's server answers a pod it cannot place or impersonate for.
type Refusal struct {
	Status  int
	Message string
}

func (r *Refusal) Error() string { return r.Message }

// Request is a call as the server received it.
type Request struct {
	// What is "email" or "token".
	What string
	// From is the caller's IP address.
	From string
}

// Server answers with what its identify function decides for a caller's
// address.
type Server struct {
	mu       sync.Mutex
	identify func(ip string) (Identity, error)
	requests []Request
	srv      *http.Server
	// Host is its host:port, for GCE_METADATA_HOST.
	Host string
}

// Start serves on addr (host:0 for a free port) until Close.
func Start(addr string, identify func(ip string) (Identity, error)) (*Server, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{identify: identify, Host: l.Addr().String()}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(l) }()
	return s, nil
}

// Close stops the server.
func (s *Server) Close() { _ = s.srv.Close() }

// Decide has identify decide the calls from now on.
func (s *Server) Decide(identify func(ip string) (Identity, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.identify = identify
}

// Requests are the calls received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

const prefix = "/computeMetadata/v1/instance/service-accounts/default/"

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Metadata-Flavor", "Google")
	w.Header().Set("Content-Type", "text/plain")
	if r.Header.Get("Metadata-Flavor") != "Google" || r.Header.Get("X-Forwarded-For") != "" {
		// The server's guard against a request relayed by a proxy, or
		// made by a page the pod fetched.
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, "Missing required header \"Metadata-Flavor\": \"Google\"\n")
		return
	}
	what := ""
	switch r.URL.Path {
	case prefix + "email":
		what = "email"
	case prefix + "token":
		what = "token"
	default:
		http.NotFound(w, r)
		return
	}
	ip, _, _ := net.SplitHostPort(r.RemoteAddr)
	s.mu.Lock()
	s.requests = append(s.requests, Request{What: what, From: ip})
	identify := s.identify
	s.mu.Unlock()
	id, err := identify(ip)
	if err != nil {
		status := http.StatusInternalServerError
		if rf, ok := err.(*Refusal); ok {
			status = rf.Status
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, err.Error()+"\n")
		return
	}
	if what == "email" {
		_, _ = io.WriteString(w, id.Email)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"access_token": id.Token, "expires_in": int64(id.ExpiresIn / time.Second), "token_type": "Bearer",
	})
}
