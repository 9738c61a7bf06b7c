package fetch

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// assertNotPublished checks that dest does not exist, and that what is
// left beside it is at most the staging of a stopped fetch, with its
// journal, for the next attempt to resume from.
func assertNotPublished(t testing.TB, dest string) {
	t.Helper()
	if _, err := os.Lstat(dest); !os.IsNotExist(err) {
		t.Errorf("%s exists after a failed fetch", dest)
	}
	entries, _ := os.ReadDir(filepath.Dir(dest))
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(filepath.Dir(dest), e.Name(), journalName)); !strings.HasPrefix(e.Name(), stagingPrefix(dest)) || err != nil {
			t.Errorf("%s left beside the destination", e.Name())
		}
	}
}

// stoppedStore is a fake S3 with a model of many files, which answers
// every request for the file named failing with failingStatus (503 if 0)
// while failing is set.
func stoppedStore(t *testing.T) (s3 *fakeS3, files map[string][]byte, failing *atomic.Value, failingStatus *atomic.Int32) {
	s3 = newFakeS3(t)
	files = model(1, 2)
	files["2/assets/large.bin"] = bytes.Repeat([]byte("L"), int(chunkedMinSize)+7)
	s3.put(t, "m", files)
	failing, failingStatus = &atomic.Value{}, &atomic.Int32{}
	failing.Store("")
	s3.setFault(func(r *http.Request) int {
		if f := failing.Load().(string); f != "" && isObjectRequest(r) && strings.HasSuffix(r.URL.Path, f) {
			return cmp.Or(int(failingStatus.Load()), http.StatusServiceUnavailable)
		}
		return 0
	})
	return s3, files, failing, failingStatus
}

// stoppedFetch is a fetch from stoppedStore with one request at a time,
// stopped with the files before 2/saved_model.pb completed.
func stoppedFetch(t *testing.T) (s3 *fakeS3, files map[string][]byte, failing *atomic.Value, failingStatus *atomic.Int32, o Options) {
	s3, files, failing, failingStatus = stoppedStore(t)
	o, _ = testOptions(t, "s3://models/m", s3.creds(t, testAccessKey, testSecretKey))
	o.Concurrency = 1
	failing.Store("2/saved_model.pb")
	_, err := Run(context.Background(), o)
	wantFailure(t, err, servingv1alpha1.ReasonFetchFailed, ExitTransient)
	return s3, files, failing, failingStatus, o
}

// TestAStoppedFetchResumesWithTheFilesItCompleted: a fetch that fails for
// a reason a retry may fix keeps the files it completed beside the
// destination; the next fetch downloads only the others, hashes the kept
// ones again, and publishes the model a fresh fetch makes, leaving
// nothing else.
func TestAStoppedFetchResumesWithTheFilesItCompleted(t *testing.T) {
	s3, files, failing, _, o := stoppedFetch(t)
	creds := s3.creds(t, testAccessKey, testSecretKey)
	assertNotPublished(t, o.Dest)

	failing.Store("")
	before := len(s3.requests)
	logs := &logBuffer{}
	o.Logger = testLogger(logs)
	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range s3.requests[before:] {
		if strings.HasPrefix(r, "GET /models/m/") {
			got = append(got, strings.TrimPrefix(r, "GET /models/m/"))
		}
	}
	if len(got) == 0 || len(got) >= len(files) || !slices.Contains(got, "2/saved_model.pb") {
		t.Errorf("the resumed fetch downloaded %q of the %d files; want the one that failed, and not those completed before\n%s", got, len(files), logs)
	}
	if !strings.Contains(logs.String(), "resuming a stopped fetch") {
		t.Errorf("the log does not say the fetch resumed:\n%s", logs)
	}
	assertTree(t, o.Dest, files)
	entries, _ := os.ReadDir(filepath.Dir(o.Dest))
	if len(entries) != 1 {
		t.Errorf("beside the model: %v; want nothing", entries)
	}
	if _, err := os.Stat(filepath.Join(o.Dest, journalName)); !os.IsNotExist(err) {
		t.Error("the published model holds the journal")
	}
	fresh, _ := testOptions(t, "s3://models/m", creds)
	want, err := Run(context.Background(), fresh)
	if err != nil || want.Digest != sum.Digest {
		t.Errorf("digest %s after resuming, %s fresh (%v)", sum.Digest, want.Digest, err)
	}
}

// TestAKeptFileDamagedSinceIsDownloadedAgain: what a stopped fetch kept
// is hashed again before it is taken, and a file whose bytes changed
// since (a crash that lost them) is downloaded.
func TestAKeptFileDamagedSinceIsDownloadedAgain(t *testing.T) {
	s3, files, failing, _, o := stoppedFetch(t)

	stopped := findStopped(o.Dest, "s3://models/m")
	if stopped == nil || stopped.files["2/assets/large.bin"].Size == 0 {
		t.Fatalf("the stopped fetch's journal: %+v; want the large file completed", stopped)
	}
	if err := os.WriteFile(filepath.Join(stopped.dir, "2/assets/large.bin"), bytes.Repeat([]byte("X"), len(files["2/assets/large.bin"])), 0o644); err != nil {
		t.Fatal(err)
	}
	failing.Store("")
	before := s3.count("GET", "/models/m/2/assets/large.bin")
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if n := s3.count("GET", "/models/m/2/assets/large.bin") - before; n == 0 {
		t.Error("the damaged file was taken, not downloaded again")
	}
	assertTree(t, o.Dest, files)
}

// TestAFetchThatEndsForGoodKeepsNothing: a failure no retry fixes, or a
// fetch of another URI into the same destination, leaves nothing kept.
func TestAFetchThatEndsForGoodKeepsNothing(t *testing.T) {
	s3, _, failing, failingStatus, o := stoppedFetch(t)

	// Another URI into the same destination does not take the files.
	s3.put(t, "other", model(1))
	failing.Store("")
	other := o
	other.URI = "s3://models/other"
	if _, err := Run(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	assertTree(t, o.Dest, model(1))
	entries, _ := os.ReadDir(filepath.Dir(o.Dest))
	if len(entries) != 1 {
		t.Errorf("beside the model: %v; want what the fetch of another URI stopped removed", entries)
	}

	// A file the store refuses, after others were completed: permanent,
	// nothing kept.
	failing.Store("2/saved_model.pb")
	failingStatus.Store(http.StatusForbidden)
	refused := o
	refused.Dest = filepath.Join(t.TempDir(), "gen-2")
	_, err := Run(context.Background(), refused)
	wantFailure(t, err, servingv1alpha1.ReasonAccessDenied, ExitPermanent)
	assertNothingPublished(t, refused.Dest)
}

// waitForParts waits, up to 10 s, until the journal of the fetch into
// dest notes n parts of the file at key.
func waitForParts(dest, origin, key string, n int) {
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if s := findStopped(dest, origin); s != nil && len(s.parts[key]) >= n {
			return
		}
	}
}

// TestALargeFileStoppedHalfwayResumesFromItsParts: a large file fetched
// as ranges whose fetch stopped with some of its parts written keeps those
// parts; the next fetch checks them against their journaled digests and
// downloads only the others, and a part damaged since is downloaded
// again. The file and the model's digest are those a fresh fetch makes.
func TestALargeFileStoppedHalfwayResumesFromItsParts(t *testing.T) {
	const key = "1/variables/variables.data-00000-of-00001"
	size := 5*digestChunkSize + 12345 // 6 parts of 16 MiB, the last short
	large := make([]byte, size)
	for i := range large {
		large[i] = byte(i * 7 % 251)
	}
	s3 := newFakeS3(t)
	files := model(1)
	files[key] = large
	s3.put(t, "m", files)
	var mu sync.Mutex
	ranges := map[string]int{}
	var refuse atomic.Value
	refuse.Store("")
	var dest atomic.Value // the fetch's, set before it runs
	dest.Store("")
	s3.setFault(func(r *http.Request) int {
		if !strings.HasSuffix(r.URL.Path, key) {
			return 0
		}
		rng := r.Header.Get("Range")
		mu.Lock()
		ranges[rng]++
		mu.Unlock()
		if rng != "" && rng == refuse.Load().(string) {
			// Refused once other parts are noted: on a loaded machine,
			// the fetch could give up before any 16 MiB part completes.
			waitForParts(dest.Load().(string), "s3://models/m", key, 2)
			return http.StatusServiceUnavailable
		}
		return 0
	})
	creds := s3.creds(t, testAccessKey, testSecretKey)
	o, _ := testOptions(t, "s3://models/m", creds)
	dest.Store(o.Dest)
	o.partSize = digestChunkSize
	part := func(i int64) string {
		return fmt.Sprintf("bytes=%d-%d", i*digestChunkSize, min((i+1)*digestChunkSize, size)-1)
	}

	refuse.Store(part(3))
	_, err := Run(context.Background(), o)
	wantFailure(t, err, servingv1alpha1.ReasonFetchFailed, ExitTransient)
	stopped := findStopped(o.Dest, "s3://models/m")
	if stopped == nil || len(stopped.parts[key]) == 0 {
		t.Fatalf("the stopped fetch noted no part of the large file: %+v", stopped)
	}
	done := map[string]bool{}
	for _, p := range stopped.parts[key] {
		done[fmt.Sprintf("bytes=%d-%d", p.Offset, p.Offset+p.Length-1)] = true
	}
	if done[part(3)] || len(done) < 2 {
		t.Fatalf("parts noted %v; want several, not the refused one", done)
	}
	// A part noted done, damaged since: downloaded again.
	damaged := ""
	for rng := range done {
		damaged = rng
		break
	}
	var off int64
	_, _ = fmt.Sscanf(damaged, "bytes=%d-", &off)
	fh, err := os.OpenFile(filepath.Join(stopped.dir, filepath.FromSlash(key)), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt([]byte("damage"), off+100); err != nil {
		t.Fatal(err)
	}
	_ = fh.Close()

	refuse.Store("")
	mu.Lock()
	before := maps.Clone(ranges)
	mu.Unlock()
	logs := &logBuffer{}
	o.Logger = testLogger(logs)
	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	after := maps.Clone(ranges)
	mu.Unlock()
	for i := range int64(6) {
		again := after[part(i)] - before[part(i)]
		switch {
		case part(i) == damaged && again == 0:
			t.Errorf("the damaged part %s was not downloaded again", part(i))
		case done[part(i)] && part(i) != damaged && again != 0:
			t.Errorf("part %s, kept, was downloaded again", part(i))
		case !done[part(i)] && again == 0:
			t.Errorf("part %s, never completed, was not downloaded", part(i))
		}
	}
	if !strings.Contains(logs.String(), `"partlyDownloaded":1`) {
		t.Errorf("the log does not say a file was resumed from its parts:\n%s", logs)
	}
	assertTree(t, o.Dest, files)
	fresh, _ := testOptions(t, "s3://models/m", creds)
	fresh.partSize = digestChunkSize
	want, err := Run(context.Background(), fresh)
	if err != nil || want.Digest != sum.Digest {
		t.Errorf("digest %s after resuming, %s fresh (%v)", sum.Digest, want.Digest, err)
	}
}
