package fetch

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// randomModel is a SavedModel's files of random bytes, which gzip does not
// shrink: its variables in shards of size bytes.
func randomModel(shards, size int) map[string][]byte {
	files := map[string][]byte{"1/saved_model.pb": []byte("graph")}
	for i := range shards {
		files[fmt.Sprintf("1/variables/variables.data-%05d-of-%05d", i, shards)] = randomBytes(size, uint64(i+1))
	}
	return files
}

// ociTestPart is the tests' part: a layer of a few hundred KiB is
// downloaded as ranges.
const ociTestPart = 8 << 10

// rangedOptions are a fetch's options with parts of ociTestPart.
func rangedOptions(t *testing.T, uri string) (Options, *logBuffer) {
	o, logs := testOptions(t, uri, "")
	o.partSize = ociTestPart
	return o, logs
}

// pushModelImage pushes files as a model image of one layer, as m:v1.
func pushModelImage(t *testing.T, reg *testRegistry, files map[string][]byte) (v1.Image, string) {
	t.Helper()
	img := imageOf(t, entries(prefixed("models/", files)))
	return img, reg.push(t, "m:v1", img)
}

// fetchInParts fetches uri with rangedOptions and checks that the model
// is files.
func fetchInParts(t *testing.T, uri string, files map[string][]byte) *logBuffer {
	t.Helper()
	o, logs := rangedOptions(t, uri)
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	assertTree(t, o.Dest, files)
	return logs
}

// layerParts is how many parts of ociTestPart img's largest layer is.
func layerParts(t *testing.T, img v1.Image) int64 {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	var most int64
	for _, l := range m.Layers {
		most = max(most, l.Size)
	}
	return (most + ociTestPart - 1) / ociTestPart
}

func TestALargeLayerIsDownloadedAsRangesSeveralAtOnce(t *testing.T) {
	reg := newTestRegistry(t, "")
	files := randomModel(4, 40<<10)
	img := imageOf(t, baseImageFiles, entries(prefixed("models/", files)))
	uri := reg.push(t, "m:v1", img)
	// Slow enough that the ranges overlap.
	reg.streamRate.Store(2 << 20)
	logs := fetchInParts(t, uri, files)
	if got, want := reg.ranges.Load(), layerParts(t, img); got != want {
		t.Errorf("%d ranges asked for, want the large layer's %d parts", got, want)
	}
	if !strings.Contains(logs.String(), "downloading a layer in ranges") {
		t.Errorf("the log does not say the layer is downloaded in ranges:\n%s", logs)
	}
	// The registry counts a download until its handler returns, which
	// may be after the fetcher has read the last byte, given the stream
	// back, and asked for the next: one more than the fetcher's own, on a
	// loaded machine.
	if got := reg.mostInFlight.Load(); got < 2 || got > ociLayersAtOnce+1 {
		t.Errorf("at most %d downloads at once, want 2 to %d", got, ociLayersAtOnce+1)
	}

	// One stream allowed: one download per layer, as before.
	before := reg.ranges.Load()
	o, logs := rangedOptions(t, uri)
	o.Concurrency = 1
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	assertTree(t, o.Dest, files)
	if n := reg.ranges.Load() - before; n != 0 {
		t.Errorf("%d ranges asked for with Concurrency 1, want none", n)
	}
}

// TestALayerIsDownloadedWholeWhenTheRegistryServesNoRanges: a registry
// (or a proxy before it) that answers a range with the whole blob costs
// one request more.
func TestALayerIsDownloadedWholeWhenTheRegistryServesNoRanges(t *testing.T) {
	reg := newTestRegistry(t, "")
	files := randomModel(2, 40<<10)
	_, uri := pushModelImage(t, reg, files)
	noRanges := func(_ http.ResponseWriter, r *http.Request) bool {
		r.Header.Del("Range")
		return false
	}
	reg.fault.Store(&noRanges)
	logs := fetchInParts(t, uri, files)
	if n := reg.blobs.Load(); n != 2 {
		t.Errorf("%d blob downloads, want 2 (the range refused, then the layer)", n)
	}
	if !strings.Contains(logs.String(), "layer downloaded whole") {
		t.Errorf("the log does not say the layer was downloaded whole:\n%s", logs)
	}
}

func TestABrokenRangeIsAskedForAgainAlone(t *testing.T) {
	reg := newTestRegistry(t, "")
	files := randomModel(4, 40<<10)
	img, uri := pushModelImage(t, reg, files)
	var failed atomic.Bool
	once := func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.HasPrefix(r.Header.Get("Range"), "bytes=32768-") || failed.Swap(true) {
			return false
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		return true
	}
	reg.fault.Store(&once)
	logs := fetchInParts(t, uri, files)
	if got, want := reg.blobs.Load(), layerParts(t, img)+1; got != want {
		t.Errorf("%d blob downloads, want %d: each part once, the broken one twice", got, want)
	}
	if !strings.Contains(logs.String(), "(bytes 32768-40959)") {
		t.Errorf("the retry does not name the range:\n%s", logs)
	}
}

// TestARangeDamagedOnItsWayFailsTheLayersDigest: each range is whole, but
// one's bytes are not the blob's: the layer's digest tells at its end, and
// the layer is downloaded again.
func TestARangeDamagedOnItsWayFailsTheLayersDigest(t *testing.T) {
	reg := newTestRegistry(t, "")
	files := randomModel(4, 40<<10)
	_, uri := pushModelImage(t, reg, files)
	var damaged atomic.Int64
	zeros := func(w http.ResponseWriter, r *http.Request) bool {
		var from, to int64
		if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &from, &to); err != nil || from != 16384 || damaged.Add(1) > 1 {
			return false
		}
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/*", from, to))
		w.WriteHeader(http.StatusPartialContent)
		_, _ = w.Write(make([]byte, to-from+1))
		return true
	}
	reg.fault.Store(&zeros)
	logs := fetchInParts(t, uri, files)
	if !strings.Contains(logs.String(), "damaged on its way") {
		t.Errorf("the retry does not say the layer was damaged:\n%s", logs)
	}

	// Damaged every time: the fetch fails, naming the digest.
	always := func(w http.ResponseWriter, r *http.Request) bool {
		damaged.Store(0)
		return zeros(w, r)
	}
	reg.fault.Store(&always)
	o, _ := rangedOptions(t, uri)
	fe := wantFailure(t, mustFail(Run(context.Background(), o)), servingv1alpha1.ReasonFetchFailed, ExitTransient)
	if !strings.Contains(fe.Message, "not sha256:") {
		t.Errorf("message %q does not say the digest differs", fe.Message)
	}
	assertNothingPublished(t, o.Dest)
}

// TestFilesPulledAtOnceShareTheirStreamsWithALargeFilesRanges: an
// artifact's large file is ranged while its small files download, and
// the downloads never outnumber ociLayersAtOnce.
func TestFilesPulledAtOnceShareTheirStreamsWithALargeFilesRanges(t *testing.T) {
	reg := newTestRegistry(t, "")
	files := randomModel(1, 200<<10)
	// After the large file in the artifact's order, so that they download
	// while its ranges do.
	for i := range 12 {
		files[fmt.Sprintf("1/variables/vocab-%d.txt", i)] = randomBytes(24<<10, uint64(100+i))
	}
	uri := reg.push(t, "m:v1", filesArtifact(t, files))
	reg.streamRate.Store(2 << 20)
	fetchInParts(t, uri, files)
	if n := reg.ranges.Load(); n < 200/8 {
		t.Errorf("%d ranges asked for, want the large file's %d at least", n, 200/8)
	}
	// As in TestALargeLayerIsDownloadedAsRangesSeveralAtOnce: the registry counts a
	// download until its handler returns, one more than the fetcher's own
	// on a loaded machine (a cold CI run saw 5).
	if got := reg.mostInFlight.Load(); got > ociLayersAtOnce+1 {
		t.Errorf("%d downloads at once, want %d at most", got, ociLayersAtOnce+1)
	}
}
