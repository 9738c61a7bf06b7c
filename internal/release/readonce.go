package release

import (
	"bytes"
	"io"
	"net/http"
	"sync"
)

// readOnce serves a repeated GET of an object from the response to the
// first, until the operation writes anything. Helm's kube client reads
// every object of an upgrade back to back: once to choose between create
// and patch, again to build the three-way patch, and a third time when
// the patch is empty. Each is a quorum read of etcd, and together they
// were half the requests of an upgrade. Every Helm configuration, which
// is one operation's, gets its own readOnce, so nothing it serves
// outlives the operation, and any write of the operation empties it (the
// release records go through another client). Only plain GETs are kept:
// a list, a watch or a poll carries a query.
type readOnce struct {
	mu     sync.Mutex
	seen   map[readKey]*readResponse
	writes int // a GET that began at another count keeps nothing
}

// readKey is an object's path and the encoding asked for: each of Helm's
// REST clients, one per kind, may ask for its own.
type readKey struct{ path, accept string }

type readResponse struct {
	status string
	code   int
	header http.Header
	body   []byte
}

func newReadOnce() *readOnce { return &readOnce{seen: map[readKey]*readResponse{}} }

// wrap is a rest.Config's WrapTransport: every client of the operation
// shares what was read.
func (r *readOnce) wrap(next http.RoundTripper) http.RoundTripper {
	return readOnceTransport{reads: r, next: next}
}

type readOnceTransport struct {
	reads *readOnce
	next  http.RoundTripper
}

func (t readOnceTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := t.reads
	switch {
	case req.Method == http.MethodGet && req.URL.RawQuery == "":
		// A plain GET of an object: answered below.
	case req.Method == http.MethodGet || req.Method == http.MethodHead:
		return t.next.RoundTrip(req)
	default:
		// Before and after: a GET overlapping the write keeps nothing.
		r.wrote()
		defer r.wrote()
		return t.next.RoundTrip(req)
	}
	key := readKey{req.URL.Path, req.Header.Get("Accept")}
	r.mu.Lock()
	kept, writes := r.seen[key], r.writes
	r.mu.Unlock()
	if kept != nil {
		return kept.response(req), nil
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	kept = &readResponse{status: resp.Status, code: resp.StatusCode, header: resp.Header.Clone(), body: body}
	r.mu.Lock()
	if r.writes == writes {
		r.seen[key] = kept
	}
	r.mu.Unlock()
	return kept.response(req), nil
}

func (r *readOnce) wrote() {
	r.mu.Lock()
	clear(r.seen)
	r.writes++
	r.mu.Unlock()
}

func (k *readResponse) response(req *http.Request) *http.Response {
	return &http.Response{
		Status: k.status, StatusCode: k.code, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        k.header.Clone(),
		Body:          io.NopCloser(bytes.NewReader(k.body)),
		ContentLength: int64(len(k.body)),
		Request:       req,
	}
}
