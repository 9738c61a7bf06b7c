// Package faultproxy is a reverse proxy to a kube-apiserver that rejects
// chosen requests with the errors an apiserver under stress returns (409,
// 429 with Retry-After, 500) and counts every request by client verb,
// resource and second, so that a test can prove a client retries, backs off
// and converges instead of hot-looping. It terminates TLS with a
// certificate of its own and re-originates it with the credentials it is
// given, so the client under test needs no credentials of its own.
package faultproxy

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// Upstream is the apiserver the proxy forwards to and how it
// authenticates there.
type Upstream struct {
	// URL of the apiserver, e.g. https://127.0.0.1:6443.
	URL string
	// CAData verifies the apiserver's certificate (PEM).
	CAData []byte
	// CertData and KeyData are the client certificate the proxy presents
	// (PEM).
	CertData, KeyData []byte
}

// Rule rejects a share of the requests it matches.
type Rule struct {
	// Verbs are Kubernetes verbs (get, list, watch, create, update, patch,
	// delete, deletecollection); empty matches all.
	Verbs []string
	// Resources are plural resource names, with "/subresource" for a
	// subresource (modelservers/status); empty matches all.
	Resources []string
	// Status is the HTTP status of the rejection: 409, 429 or 500.
	Status int
	// Fraction of the matching requests rejected, in (0, 1]; 0 means 1.
	Fraction float64
	// RetryAfter is sent with a 429, in seconds; 0 means 1.
	RetryAfter int
}

// Request says what a request was, as the apiserver's authorizer would.
type Request struct {
	Verb, Resource, Namespace, Name string
}

// IsWrite says whether the request changes state.
func (r Request) IsWrite() bool {
	switch r.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// Record is one request the proxy saw.
type Record struct {
	Request
	At       time.Time
	Rejected int // status of the injected rejection, 0 if forwarded
}

// Proxy is a running fault-injecting proxy.
type Proxy struct {
	server *httptest.Server
	rp     *httputil.ReverseProxy

	mu      sync.Mutex
	rules   []Rule
	rng     *rand.Rand
	records []Record
}

// Start runs a proxy to up on a loopback port. seed makes the choice of
// rejected requests repeatable.
func Start(up Upstream, seed uint64) (*Proxy, error) {
	target, err := url.Parse(up.URL)
	if err != nil {
		return nil, fmt.Errorf("upstream URL: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(up.CAData) {
		return nil, fmt.Errorf("upstream CA: no certificate in CAData")
	}
	tlsCfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if len(up.CertData) > 0 {
		cert, err := tls.X509KeyPair(up.CertData, up.KeyData)
		if err != nil {
			return nil, fmt.Errorf("upstream client certificate: %w", err)
		}
		tlsCfg.Certificates = []tls.Certificate{cert}
	}
	p := &Proxy{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			// The client's own credentials, if any, are not the proxy's.
			r.Out.Header.Del("Authorization")
		},
		Transport: &http.Transport{TLSClientConfig: tlsCfg, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 64},
		// Watches stream: pass every event on at once.
		FlushInterval: -1,
		ErrorLog:      nil,
	}
	p.server = httptest.NewUnstartedServer(http.HandlerFunc(p.serve))
	p.server.EnableHTTP2 = true
	p.server.StartTLS()
	return p, nil
}

// URL is the proxy's address.
func (p *Proxy) URL() string { return p.server.URL }

// CAData is the PEM certificate a client must trust to reach the proxy.
func (p *Proxy) CAData() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.server.Certificate().Raw})
}

// WriteKubeconfig writes a kubeconfig that points at the proxy to path.
func (p *Proxy) WriteKubeconfig(path string) error {
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: proxy
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: proxied
  user: {}
contexts:
- name: proxy
  context: {cluster: proxy, user: proxied, namespace: default}
current-context: proxy
`, p.URL(), b64(p.CAData()))
	return os.WriteFile(path, []byte(cfg), 0o600)
}

// Close stops the proxy and drops its connections, watches included. The
// listener goes first: a client still running reconnects at once, and a
// connection made after the others were dropped would hold Close forever.
func (p *Proxy) Close() {
	_ = p.server.Listener.Close()
	p.server.CloseClientConnections()
	p.server.Close()
}

// SetRules replaces the rules; nil lets every request through.
func (p *Proxy) SetRules(rules ...Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = slices.Clone(rules)
}

// Records returns the requests seen at or after since.
func (p *Proxy) Records(since time.Time) []Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	i, _ := slices.BinarySearchFunc(p.records, since, func(r Record, t time.Time) int { return r.At.Compare(t) })
	return slices.Clone(p.records[i:])
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	req := Parse(r.Method, r.URL)
	status, retryAfter := p.decide(req)
	if status == 0 {
		p.rp.ServeHTTP(w, r)
		return
	}
	reject(w, req, status, retryAfter)
}

// decide records the request and picks the rejection, if any.
func (p *Proxy) decide(req Request) (int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	rec := Record{Request: req, At: time.Now()}
	for _, rule := range p.rules {
		if !rule.matches(req) {
			continue
		}
		f := rule.Fraction
		if f == 0 {
			f = 1
		}
		if p.rng.Float64() < f {
			rec.Rejected = rule.Status
			p.records = append(p.records, rec)
			return rule.Status, max(rule.RetryAfter, 1)
		}
	}
	p.records = append(p.records, rec)
	return 0, 0
}

func (r Rule) matches(req Request) bool {
	return (len(r.Verbs) == 0 || slices.Contains(r.Verbs, req.Verb)) &&
		(len(r.Resources) == 0 || slices.Contains(r.Resources, req.Resource))
}

// reject answers as the apiserver does: a Status object with the reason
// client-go classifies by.
func reject(w http.ResponseWriter, req Request, status, retryAfter int) {
	reason := map[int]string{
		http.StatusConflict:            "Conflict",
		http.StatusTooManyRequests:     "TooManyRequests",
		http.StatusInternalServerError: "InternalError",
	}[status]
	if reason == "" {
		reason = "Unknown"
	}
	body := map[string]any{
		"kind":       "Status",
		"apiVersion": "v1",
		"status":     "Failure",
		"message":    fmt.Sprintf("injected fault: %s %s %s/%s", req.Verb, req.Resource, req.Namespace, req.Name),
		"reason":     reason,
		"code":       status,
	}
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", fmt.Sprint(retryAfter))
		body["details"] = map[string]any{"retryAfterSeconds": retryAfter}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// Parse reads the verb and resource of an API request from its method and
// URL, as the apiserver's request info resolver does for the paths
// /api/v1/... and /apis/<group>/<version>/...; other paths (discovery,
// /healthz) come back with an empty resource.
func Parse(method string, u *url.URL) Request {
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		rest = parts[3:]
	default:
		return Request{Verb: strings.ToLower(method)}
	}
	var out Request
	if len(rest) >= 2 && rest[0] == "namespaces" && len(rest) != 2 {
		out.Namespace, rest = rest[1], rest[2:]
	}
	switch len(rest) {
	case 0:
		return Request{Verb: strings.ToLower(method)}
	case 1:
		out.Resource = rest[0]
	case 2:
		out.Resource, out.Name = rest[0], rest[1]
	default:
		out.Resource, out.Name = rest[0]+"/"+rest[2], rest[1]
	}
	watch := u.Query().Get("watch")
	switch method {
	case http.MethodGet:
		switch {
		case watch == "true" || watch == "1":
			out.Verb = "watch"
		case out.Name == "":
			out.Verb = "list"
		default:
			out.Verb = "get"
		}
	case http.MethodPost:
		out.Verb = "create"
	case http.MethodPut:
		out.Verb = "update"
	case http.MethodPatch:
		out.Verb = "patch"
	case http.MethodDelete:
		out.Verb = "delete"
		if out.Name == "" {
			out.Verb = "deletecollection"
		}
	default:
		out.Verb = strings.ToLower(method)
	}
	return out
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// Rate summarises records over the span [from, to): the mean requests per
// second and the busiest one-second bucket.
type Rate struct {
	Requests int
	Mean     float64
	Peak     int
}

// RateOf measures records within [from, to); keep selects which count
// (nil: all).
func RateOf(records []Record, from, to time.Time, keep func(Record) bool) Rate {
	buckets := map[int64]int{}
	var r Rate
	for _, rec := range records {
		if rec.At.Before(from) || !rec.At.Before(to) || (keep != nil && !keep(rec)) {
			continue
		}
		r.Requests++
		b := rec.At.Sub(from).Milliseconds() / 1000
		buckets[b]++
		r.Peak = max(r.Peak, buckets[b])
	}
	if secs := to.Sub(from).Seconds(); secs > 0 {
		r.Mean = float64(r.Requests) / secs
	}
	return r
}
