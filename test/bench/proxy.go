package main

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/rest"
)

// countingProxy stands between an operator and the apiserver and counts
// each request by verb and resource. client-go's own request metrics know
// only the method and host, and the apiserver's audit log would need a
// policy per user; a proxy counts both operators the same way.
type countingProxy struct {
	URL    string
	server *http.Server

	mu     sync.Mutex
	counts map[string]*atomic.Int64 // "verb resource"
}

func startCountingProxy(target *rest.Config) (*countingProxy, error) {
	upstream, err := url.Parse(target.Host)
	if err != nil {
		return nil, err
	}
	transport, err := rest.TransportFor(target)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &countingProxy{URL: "http://" + l.Addr().String(), counts: map[string]*atomic.Int64{}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(upstream)
		},
		Transport: transport,
		// Watches stream: pass every event on as it comes.
		FlushInterval: -1,
	}
	p.server = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.counter(requestKind(r)).Add(1)
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = p.server.Serve(l) }()
	return p, nil
}

func (p *countingProxy) Close() { _ = p.server.Close() }

func (p *countingProxy) counter(key string) *atomic.Int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.counts[key]
	if !ok {
		c = &atomic.Int64{}
		p.counts[key] = c
	}
	return c
}

// Snapshot returns the counts so far, by "verb resource".
func (p *countingProxy) Snapshot() counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := counts{}
	for k, c := range p.counts {
		out[k] = c.Load()
	}
	return out
}

// counts are API requests by "verb resource".
type counts map[string]int64

// Sub returns c minus an earlier snapshot.
func (c counts) Sub(earlier counts) counts {
	out := counts{}
	for k, v := range c {
		if d := v - earlier[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func (c counts) Total() int64 {
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

// Writes counts the requests that change something.
func (c counts) Writes() int64 {
	var n int64
	for k, v := range c {
		switch verb, _, _ := strings.Cut(k, " "); verb {
		case "create", "update", "patch", "delete", "deletecollection":
			n += v
		}
	}
	return n
}

// requestKind names a request as the apiserver's RequestInfo would:
// its verb (get, list, watch, create, update, patch, delete) and resource
// (with the subresource, e.g. modelservers/status). Discovery and other
// non-resource paths are "get discovery".
func requestKind(r *http.Request) string {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	// /api/v1/... or /apis/group/version/...
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return strings.ToLower(r.Method) + " discovery"
	}
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) != 2 {
		parts = parts[2:] // a namespaced resource, not a namespace itself
	}
	resource, name := parts[0], ""
	if len(parts) >= 2 {
		name = parts[1]
	}
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	verb := ""
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		switch {
		case r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1":
			verb = "watch"
		case name == "":
			verb = "list"
		default:
			verb = "get"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
		if name == "" {
			verb = "deletecollection"
		}
	default:
		verb = strings.ToLower(r.Method)
	}
	return verb + " " + resource
}
