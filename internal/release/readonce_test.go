package release

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// objectServer answers every request with its method, path and how many
// requests it has had, counting the requests of each "METHOD path?query".
type objectServer struct {
	mu   sync.Mutex
	hits map[string]int
	n    int
}

func (s *objectServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.n++
	s.hits[r.Method+" "+r.URL.RequestURI()]++
	n := s.n
	s.mu.Unlock()
	if strings.HasSuffix(r.URL.Path, "/missing") {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, r.Method+" "+r.URL.Path+" #"+strconv.Itoa(n))
}

func TestReadOnceServesARepeatedReadUntilAWrite(t *testing.T) {
	server := &objectServer{hits: map[string]int{}}
	ts := httptest.NewServer(server)
	defer ts.Close()
	reads := newReadOnce()
	// Two clients of one operation, as Helm makes one per kind.
	services := &http.Client{Transport: reads.wrap(http.DefaultTransport)}
	deployments := &http.Client{Transport: reads.wrap(http.DefaultTransport)}

	do := func(c *http.Client, method, path, accept string) string {
		t.Helper()
		req, err := http.NewRequest(method, ts.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(body)
	}

	const svc = "/api/v1/namespaces/ns/services/a"
	first := do(services, "GET", svc, "application/json")
	again := do(services, "GET", svc, "application/json")
	third := do(deployments, "GET", svc, "application/json")
	if again != first || third != first {
		t.Errorf("repeated reads %q, %q; want the first's %q", again, third, first)
	}
	if other := do(services, "GET", svc, "application/vnd.kubernetes.protobuf"); other == first {
		t.Error("a read in another encoding was served the JSON one's")
	}

	do(services, "PATCH", svc, "")
	if after := do(services, "GET", svc, "application/json"); after == first {
		t.Errorf("the read after a write was served from before it: %q", after)
	}
	// Any write of the operation starts afresh, not only one to the object.
	do(services, "GET", svc, "application/json")
	do(deployments, "DELETE", "/apis/apps/v1/namespaces/ns/deployments/b", "")
	do(services, "GET", svc, "application/json")

	for range 2 {
		do(services, "GET", "/api/v1/namespaces/ns/pods?labelSelector=app%3Dx", "")
		do(services, "GET", "/api/v1/namespaces/ns/services/missing", "")
	}

	want := map[string]int{
		"GET " + svc:   4, // first, a protobuf read, after the PATCH, after the DELETE
		"PATCH " + svc: 1,
		"DELETE /apis/apps/v1/namespaces/ns/deployments/b":     1,
		"GET /api/v1/namespaces/ns/pods?labelSelector=app%3Dx": 2, // a list is never kept
		"GET /api/v1/namespaces/ns/services/missing":           2, // nor a failed read
	}
	server.mu.Lock()
	defer server.mu.Unlock()
	for req, n := range want {
		if server.hits[req] != n {
			t.Errorf("%s reached the server %d times, want %d", req, server.hits[req], n)
		}
	}
	if len(server.hits) != len(want) {
		t.Errorf("the server saw %v, want %v", server.hits, want)
	}
}
