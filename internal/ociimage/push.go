package ociimage

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// ErrNoRegistry is what Push's error wraps when nothing listens on the
// registry's address, so that a command can say how to start one.
var ErrNoRegistry = errors.New("no registry listens")

// Push pushes img, an image or an image index (v1.Image or
// v1.ImageIndex), to ref, e.g. 127.0.0.1:5000/modelserver-operator:0.1.0,
// over plain HTTP without credentials. The registry must be on this
// machine (see IsLocalHost): anywhere else Push refuses, because neither
// the image nor the registry is authenticated.
func Push(ctx context.Context, img remote.Taggable, ref string) error {
	r, hostport, err := localReference(ref)
	if err != nil {
		return err
	}
	// remote.Write retries a refused connection with backoff and then
	// reports it in words that do not say "no registry"; one dial first
	// says it at once.
	var d net.Dialer
	dialCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	conn, err := d.DialContext(dialCtx, "tcp", hostport)
	cancel()
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("push %s: %w on %s: %w", ref, ErrNoRegistry, hostport, err)
		}
		return fmt.Errorf("push %s: reach the registry on %s: %w", ref, hostport, err)
	}
	_ = conn.Close()

	err = remote.Push(r, img,
		remote.WithContext(ctx),
		// Not the user's docker credentials: they are for other registries.
		remote.WithAuth(authn.Anonymous),
		remote.WithTransport(directTransport()),
	)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("push %s: %w on %s: %w", ref, ErrNoRegistry, hostport, err)
		}
		return fmt.Errorf("push %s: %w", ref, err)
	}
	return nil
}

// localReference parses ref and allows plain HTTP to it only when its
// registry is on this machine; hostport is the address to dial.
func localReference(ref string) (r name.Reference, hostport string, err error) {
	parsed, err := name.ParseReference(ref)
	if err != nil {
		return nil, "", fmt.Errorf("image reference %q: %w", ref, err)
	}
	registry := parsed.Context().RegistryStr()
	u, err := url.Parse("//" + registry)
	if err != nil {
		return nil, "", fmt.Errorf("registry %q of %q: %w", registry, ref, err)
	}
	if !IsLocalHost(u.Hostname()) {
		return nil, "", fmt.Errorf("refusing to push %q to %s: only a registry on this machine (localhost, 127.0.0.0/8, ::1, 198.18.0.0/15) is pushed to, over plain HTTP without credentials", ref, registry)
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	r, err = name.ParseReference(ref, name.Insecure)
	if err != nil {
		return nil, "", fmt.Errorf("image reference %q: %w", ref, err)
	}
	return r, net.JoinHostPort(u.Hostname(), port), nil
}

// directTransport never goes through $HTTP_PROXY: a proxy would not reach
// this machine's registry (Go's proxy rules skip loopback, but not
// 198.18.0.0/15).
func directTransport() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	return t
}
