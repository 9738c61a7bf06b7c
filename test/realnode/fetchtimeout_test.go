package realnode

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
	"github.com/modelserver-dev/modelserver-operator/test/realenv"
)

// stallingStore is a proxy in front of the S3 server that holds every
// request stall picks, unanswered, while stall is set, sends the bodies
// of all at rate bytes per second together while rate is set, and none
// while hold is, and counts the GETs of each path and range.
type stallingStore struct {
	stall atomic.Value // a string: the path's end and the range, as key makes them
	rate  atomic.Int64
	hold  atomic.Bool
	mu    sync.Mutex
	gets  map[string]int
	next  time.Time // when the bytes sent so far at rate are due
	url   string
}

// pace waits while the store holds its answers, then until n more bytes
// are due at the rate set, if one is.
func (s *stallingStore) pace(n int) {
	for s.hold.Load() {
		time.Sleep(50 * time.Millisecond)
	}
	rate := s.rate.Load()
	if rate <= 0 {
		return
	}
	s.mu.Lock()
	at := time.Now()
	if s.next.After(at) {
		at = s.next
	}
	at = at.Add(time.Duration(float64(n) / float64(rate) * float64(time.Second)))
	s.next = at
	s.mu.Unlock()
	time.Sleep(time.Until(at))
}

// pacedWriter sends a response's body at its store's rate.
type pacedWriter struct {
	http.ResponseWriter
	s *stallingStore
}

func (w pacedWriter) Write(b []byte) (int, error) {
	sent := 0
	for len(b) > 0 {
		n := min(len(b), 32<<10)
		w.s.pace(n)
		m, err := w.ResponseWriter.Write(b[:n])
		if sent += m; err != nil {
			return sent, err
		}
		b = b[n:]
	}
	return sent, nil
}

func (w pacedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// key is a request as the store counts and stalls it: the path, and the
// range asked for, if any.
func key(r *http.Request) string {
	return strings.TrimSpace(r.URL.Path + " " + r.Header.Get("Range"))
}

func newStallingStore(t *testing.T, s3 string) *stallingStore {
	target, err := url.Parse(s3)
	if err != nil {
		t.Fatal(err)
	}
	s := &stallingStore{gets: map[string]int{}}
	s.stall.Store("")
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = r.In.Host // signed by the client
	}}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := key(r)
		if r.Method == http.MethodGet {
			s.mu.Lock()
			s.gets[k]++
			s.mu.Unlock()
		}
		if stall := s.stall.Load().(string); stall != "" && strings.HasSuffix(k, stall) {
			<-r.Context().Done() // no answer, until the client gives up
			return
		}
		proxy.ServeHTTP(pacedWriter{w, s}, r)
	})}
	l, err := net.Listen("tcp", localcluster.HostAddress+":0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	s.url = "http://" + l.Addr().String()
	return s
}

// getsOf counts the GETs whose key ends with suffix.
func (s *stallingStore) getsOf(suffix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, c := range s.gets {
		if strings.HasSuffix(k, suffix) {
			n += c
		}
	}
	return n
}

// rangesOf are the GETs of the ranges of a path, by range.
func (s *stallingStore) rangesOf(path string) map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, c := range s.gets {
		if p, rng, ok := strings.Cut(k, " "); ok && strings.HasSuffix(p, path) {
			out[rng] += c
		}
	}
	return out
}

// TestAFetchOutOfTimeIsStoppedThenResumedOnceGivenMore: a store that
// answers nothing for one range of the model's 200 MiB file holds the real
// fetch until spec.fetch.timeout, when the Job controller stops its pod
// and the fetch fails with reason Timeout, what it completed kept on the
// volume: the other files, and the other parts of the large one. A longer
// timeout makes the Job again, which downloads only that range, and the
// ModelServer becomes Ready.
func TestAFetchOutOfTimeIsStoppedThenResumedOnceGivenMore(t *testing.T) {
	t.Parallel()
	e := realNode(t)
	ns := e.namespace(t)
	store := newStallingStore(t, e.S3Endpoint)
	const large, held = "/assets/large.bin", "bytes=50331648-67108863" // its fourth 16 MiB part
	store.stall.Store(large + " " + held)
	e.kubectl(t, strings.Replace(e.CredentialsSecret("proxied", ""), e.S3Endpoint, store.url, 1), "-n", ns, "apply", "-f", "-")

	manifest := func(timeout string) string {
		return e.ModelServerYAML(realenv.ModelServer{Name: "stalled", URI: bigModel, Secret: "proxied", Storage: "1Gi", SpecExtra: "  fetch:\n    timeout: " + timeout + "\n"})
	}
	e.kubectl(t, manifest("1m"), "-n", ns, "apply", "-f", "-")
	start := time.Now()
	msg := e.waitFetchFailed(t, ns, "stalled", "Timeout")
	t.Logf("the fetch failed %.1fs after kubectl apply: %s", time.Since(start).Seconds(), msg)
	if want := "the fetch did not finish within spec.fetch.timeout, 1m0s, and was stopped"; !strings.HasPrefix(msg, want) {
		t.Errorf("ModelFetched message %q, want it to begin %q", msg, want)
	}
	pods, err := e.cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=" + values.ComponentFetch})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == "Running" {
			t.Errorf("fetch pod %s still runs after its Job's deadline", p.Name)
		}
	}
	if n := store.getsOf("/saved_model.pb"); n != 1 {
		t.Fatalf("%d GETs of saved_model.pb before the stop, want 1", n)
	}
	before := store.rangesOf(large)
	if before[held] == 0 || len(before) < 13 {
		t.Fatalf("the large file's ranges asked for before the stop: %v; want its 13 parts", before)
	}
	volume := e.volumeDir(t, ns, "stalled")
	if kept, _ := filepath.Glob(filepath.Join(volume, "*.partial-*", ".modelserver-fetch.journal")); len(kept) != 1 {
		t.Errorf("the stopped fetch kept %v on the volume; want one staging directory with its journal", kept)
	}

	store.stall.Store("")
	e.kubectl(t, manifest("5m"), "-n", ns, "apply", "-f", "-")
	e.waitReady(t, ns, "stalled", 3*time.Minute)
	if got := e.modelStatus(t, ns, "stalled"); got["123"] != "AVAILABLE" {
		t.Errorf("TF Serving (double) reports %v, want version 123 AVAILABLE", got)
	}
	if n := store.getsOf("/saved_model.pb"); n != 1 {
		t.Errorf("saved_model.pb was downloaded again (%d GETs): the fetch made again did not resume", n)
	}
	for rng, n := range store.rangesOf(large) {
		if again := n - before[rng]; (rng == held) != (again > 0) {
			t.Errorf("range %s of the large file asked for %d more times after the stop; want only the one held back", rng, again)
		}
	}
	logs := e.kubectl(t, "", "-n", ns, "logs", "-l", "job-name", "-c", "fetch", "--tail=-1")
	if !strings.Contains(logs, `"msg":"resuming a stopped fetch`) {
		t.Errorf("the fetch made again does not say it resumed:\n%s", logs)
	}
	if n := e.eventCounts(t, ns, "involvedObject.kind=ModelServer")["Normal/FetchRetried"]; n != 1 {
		t.Errorf("%d FetchRetried Events, want 1", n)
	}
	if left, _ := filepath.Glob(filepath.Join(volume, "*.partial-*")); len(left) != 0 {
		t.Errorf("the volume still holds %v", left)
	}
}
