package ociimage

import (
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

// Registry is an OCI distribution registry on this machine, for the
// images Push sends and a node's containerd pulls. It keeps blobs in a
// directory but manifests and tags in memory (go-containerregistry's
// registry has no other manifest store): after a restart, push again.
type Registry struct {
	ln  net.Listener
	srv *http.Server
	// tlsSrv serves the same registry over TLS (ServeTLS), nil until then.
	tlsSrv *http.Server

	done     chan struct{}
	serveErr error

	closeOnce sync.Once
	closeErr  error
}

// RegistryOption changes what StartRegistry starts.
type RegistryOption func(*registryConfig)

type registryConfig struct {
	requestLog io.Writer
	// private are the repositories whose downloads need credentials.
	private *privateRepositories
}

type privateRepositories struct {
	prefix, user, password string
}

// RegistryPrivate makes the downloads (GET) of repositories whose name
// starts with prefix ask for basic credentials user:password, as a private
// registry does, for tests of clients that must send them. Pushes, and
// existence checks (HEAD), stay open.
func RegistryPrivate(prefix, user, password string) RegistryOption {
	return func(c *registryConfig) {
		c.private = &privateRepositories{prefix: prefix, user: user, password: password}
	}
}

func (p *privateRepositories) wrap(h http.Handler) http.Handler {
	if p == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodGet && strings.HasPrefix(req.URL.Path, "/v2/"+p.prefix) {
			u, pw, ok := req.BasicAuth()
			if !ok || subtle.ConstantTimeCompare([]byte(u+":"+pw), []byte(p.user+":"+p.password)) != 1 {
				w.Header().Set("WWW-Authenticate", `Basic realm="localcluster"`)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
				return
			}
		}
		h.ServeHTTP(w, req)
	})
}

// RegistryRequestLog logs each request the registry answers to w; by
// default they are not logged.
func RegistryRequestLog(w io.Writer) RegistryOption {
	return func(c *registryConfig) { c.requestLog = w }
}

// StartRegistry serves a registry on addr ("" is 127.0.0.1 on a free
// port), which must be on this machine (see IsLocalHost): the registry
// speaks plain HTTP and lets anyone push. Blobs are kept in blobDir,
// created if missing; "" keeps them in memory.
func StartRegistry(addr, blobDir string, opts ...RegistryOption) (*Registry, error) {
	cfg := registryConfig{requestLog: io.Discard}
	for _, o := range opts {
		o(&cfg)
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	if err := checkLocalHostPort(addr, "registry address"); err != nil {
		return nil, err
	}

	regOpts := []registry.Option{
		registry.Logger(log.New(cfg.requestLog, "registry: ", log.LstdFlags)),
	}
	if blobDir != "" {
		// The disk handler writes its temporary files into blobDir and
		// fails if it does not exist.
		if err := os.MkdirAll(blobDir, 0o755); err != nil {
			return nil, fmt.Errorf("create the registry's blob directory: %w", err)
		}
		regOpts = append(regOpts, registry.WithBlobHandler(registry.NewDiskBlobHandler(blobDir)))
	}

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for the registry on %s: %w", addr, err)
	}
	r := &Registry{
		ln: ln,
		srv: &http.Server{
			Handler:           cfg.private.wrap(registry.New(regOpts...)),
			ReadHeaderTimeout: 30 * time.Second,
			ErrorLog:          log.New(cfg.requestLog, "registry: ", log.LstdFlags),
		},
		done: make(chan struct{}),
	}
	go func() {
		r.serveErr = r.srv.Serve(ln)
		close(r.done)
	}()
	return r, nil
}

// Addr is the registry's host:port, e.g. 127.0.0.1:5000, the first part
// of the references pushed to it.
func (r *Registry) Addr() string { return r.ln.Addr().String() }

// Done is closed when the registry stops serving; Err then says why.
func (r *Registry) Done() <-chan struct{} { return r.done }

// Err is why the registry stopped serving: nil after Close, or an error
// of its listener. It is nil while the registry serves.
func (r *Registry) Err() error {
	select {
	case <-r.done:
		if errors.Is(r.serveErr, http.ErrServerClosed) {
			return nil
		}
		return r.serveErr
	default:
		return nil
	}
}

// Close stops the registry at once, dropping uploads under way.
func (r *Registry) Close() error {
	r.closeOnce.Do(func() {
		if r.tlsSrv != nil {
			r.closeErr = r.tlsSrv.Close()
		}
		r.closeErr = errors.Join(r.closeErr, r.srv.Close())
		<-r.done
		r.closeErr = errors.Join(r.closeErr, r.Err())
	})
	return r.closeErr
}

// ServeTLS serves the same registry over TLS with cert on addr, which must
// be on this machine, for clients that insist on verifying a registry's
// certificate (operator-sdk's image pulls); it returns the host:port. Call
// it once, before Close.
func (r *Registry) ServeTLS(addr string, cert tls.Certificate) (string, error) {
	if err := checkLocalHostPort(addr, "registry TLS address"); err != nil {
		return "", err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("listen for the registry on %s: %w", addr, err)
	}
	r.tlsSrv = &http.Server{
		Handler:           r.srv.Handler,
		ReadHeaderTimeout: r.srv.ReadHeaderTimeout,
		ErrorLog:          r.srv.ErrorLog,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	}
	go func() { _ = r.tlsSrv.ServeTLS(ln, "", "") }()
	return ln.Addr().String(), nil
}
