package fetch

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// serveRanged serves the archive current returns as a file server does,
// ranges and ETag included, counting the requests for a range.
func serveRanged(t *testing.T, current func(rng string) (body []byte, etag string)) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var ranges atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rng := r.Header.Get("Range")
		if rng != "" {
			ranges.Add(1)
		}
		body, etag := current(rng)
		w.Header().Set("ETag", etag)
		http.ServeContent(w, r, "m", time.Time{}, bytes.NewReader(body))
	}))
	t.Cleanup(srv.Close)
	return srv, &ranges
}

func TestALargeArchiveOverHTTPIsReadInPartsWhereRangesAreServed(t *testing.T) {
	files := largeModel()
	archive := tarball(t, true, entries(files))
	srv, ranges := serveRanged(t, func(string) ([]byte, string) { return archive, `"v1"` })
	o, logs := testOptions(t, srv.URL+"/m.tar.gz#sha256="+sha256Hex(archive), "")
	o.partSize = testPartSize
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	assertTree(t, o.Dest, files)
	if want := int64(len(archive)+testPartSize-1) / testPartSize; ranges.Load() != want {
		t.Errorf("%d ranges asked for, want one for each of the archive's %d parts", ranges.Load(), want)
	}

	// With one request at a time, the archive is asked for whole.
	ranges.Store(0)
	o.Dest += "-whole"
	o.Concurrency = 1
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if n := ranges.Load(); n != 0 {
		t.Errorf("%d ranges asked for with Concurrency 1, want none", n)
	}
}

// TestAnArchiveOverHTTPReplacedWhileReadInPartsIsReadAgain: a part of
// another ETag fails the attempt; the next reads the new archive.
func TestAnArchiveOverHTTPReplacedWhileReadInPartsIsReadAgain(t *testing.T) {
	files := largeModel()
	old := tarball(t, false, entries(files))
	replacement := largeModel()
	replacement["1/assets/vocab.txt"] = []byte("x\ny\nz\n")
	updated := tarball(t, false, entries(replacement))
	var replaced atomic.Bool
	srv, _ := serveRanged(t, func(rng string) ([]byte, string) {
		// The eighth part is asked for once the first is read.
		if strings.HasPrefix(rng, "bytes=458752-") {
			replaced.Store(true)
		}
		if replaced.Load() {
			return updated, `"v2"`
		}
		return old, `"v1"`
	})
	o, logs := testOptions(t, srv.URL+"/m.tar", "")
	o.partSize = testPartSize
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	assertTree(t, o.Dest, replacement)
	if !strings.Contains(logs.String(), `the file changed during the fetch (\"v1\", then \"v2\")`) {
		t.Errorf("the retry does not say the file changed:\n%s", logs)
	}
}

func TestABrokenPartOverHTTPIsAskedForAgainAlone(t *testing.T) {
	files := largeModel()
	archive := tarball(t, true, entries(files))
	var failed atomic.Bool
	srv, ranges := serveRanged(t, func(string) ([]byte, string) { return archive, `"v1"` })
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.Header.Get("Range"), "bytes=131072-") && !failed.Swap(true) {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		srv.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(broken.Close)
	o, logs := testOptions(t, broken.URL+"/m.tar.gz", "")
	o.partSize = testPartSize
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	assertTree(t, o.Dest, files)
	if want := int64(len(archive)+testPartSize-1) / testPartSize; ranges.Load() != want {
		t.Errorf("%d ranges served, want the archive's %d parts once each (the broken one asked again)", ranges.Load(), want)
	}
	if !strings.Contains(logs.String(), "(bytes=131072-196607)") {
		t.Errorf("the retry does not name the part:\n%s", logs)
	}
}
