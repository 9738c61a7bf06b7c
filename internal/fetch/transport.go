package fetch

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// transportOptions shape the HTTP transport of every source.
type transportOptions struct {
	// CABundle is extra PEM certificates to trust, beside the system's.
	CABundle []byte
	// CAKey is the credentials key CABundle came from, for messages
	// ("": AWS_CA_BUNDLE).
	CAKey string
	// InsecureSkipVerify turns certificate checks off.
	InsecureSkipVerify bool
	// Conns is how many connections to one host are kept open: the
	// download concurrency, so that parallel downloads reuse connections.
	Conns int
	// ResponseHeaderTimeout bounds the wait for a response's first byte.
	ResponseHeaderTimeout time.Duration
	// Received, when set, counts every byte the transport's connections
	// receive.
	Received *atomic.Int64
}

// newTransport builds the HTTP transport of a source: proxies from the
// environment (the Job gets the cluster's proxy settings), a keep-alive
// connection for each parallel download, and the trust given. HTTP/1.1
// only: parallel downloads on connections of their own keep their
// throughput where one HTTP/2 connection would share a single TCP window
// (S3 speaks only HTTP/1.1 anyway).
func newTransport(o transportOptions) (*http.Transport, error) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(o.CABundle) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(o.CABundle) {
			return nil, permanentf(servingv1alpha1.ReasonFetchFailed, "credentials key %s holds no PEM certificate", cmp.Or(o.CAKey, KeyAWSCABundle))
		}
		tlsConfig.RootCAs = pool
	}
	if o.InsecureSkipVerify {
		tlsConfig.InsecureSkipVerify = true // asked for explicitly: a test store with a self-signed certificate
	}
	conns := max(o.Conns, 1) + 4
	header := o.ResponseHeaderTimeout
	if header <= 0 {
		header = 2 * time.Minute
	}
	dial := (&net.Dialer{
		Timeout:   30 * time.Second,
		KeepAlive: 30 * time.Second,
	}).DialContext
	if o.Received != nil {
		dial = countReceived(dial, o.Received)
	}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dial,
		TLSClientConfig:       tlsConfig,
		MaxIdleConns:          4 * conns,
		MaxIdleConnsPerHost:   conns,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   15 * time.Second,
		ResponseHeaderTimeout: header,
		ExpectContinueTimeout: time.Second,
	}, nil
}

// headerTransport adds fixed headers to every request to host, the model
// URL's, and to no other: a server that redirects to another (a CDN, a
// bucket's signed URL, as release assets and artifact repositories do)
// must not be handed the Secret's credentials, as net/http drops its own
// Authorization on such a redirect; a signed URL would even refuse them.
type headerTransport struct {
	base    http.RoundTripper
	host    string
	headers [][2]string
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.EqualFold(req.URL.Host, t.host) {
		return t.base.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	for _, h := range t.headers {
		req.Header.Add(h[0], h[1])
	}
	return t.base.RoundTrip(req)
}

// countReceived counts into n the bytes each connection dial makes
// receives: what the store sent, TLS and HTTP framing included, as it
// would be billed for.
func countReceived(dial func(ctx context.Context, network, addr string) (net.Conn, error), n *atomic.Int64) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c, n: n}, nil
	}
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	k, err := c.Conn.Read(p)
	c.n.Add(int64(k))
	return k, err
}
