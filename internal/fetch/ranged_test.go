package fetch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

const (
	testPartSize  = 64 << 10
	largeFileKey  = "1/variables/variables.data-00000-of-00001"
	largeFilePath = "/models/m/" + largeFileKey
)

// largeModel is a model whose data file is 10 parts and a bit of
// testPartSize: large enough to be downloaded as ranges.
func largeModel() map[string][]byte {
	files := model(1)
	data := make([]byte, 10*testPartSize+123)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	files[largeFileKey] = data
	return files
}

// rangesOf records the Range header of every GET of the large file.
type rangesOf struct {
	mu     sync.Mutex
	ranges []string
}

func (r *rangesOf) record(req *http.Request) {
	if req.Method == http.MethodGet && req.URL.Path == largeFilePath {
		r.add(req.Header.Get("Range"))
	}
}

func (r *rangesOf) add(rng string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ranges = append(r.ranges, rng)
}

func (r *rangesOf) count(rng string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, got := range r.ranges {
		if got == rng {
			n++
		}
	}
	return n
}

func TestALargeFileIsFetchedAsRangesAndReassembled(t *testing.T) {
	s3 := newFakeS3(t)
	files := largeModel()
	s3.put(t, "m", files)
	var seen rangesOf
	s3.setFault(func(r *http.Request) int { seen.record(r); return 0 })
	o, _ := testOptions(t, "s3://models/m", s3.creds(t, testAccessKey, testSecretKey))
	o.partSize = testPartSize
	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	assertTree(t, o.Dest, files)
	if len(seen.ranges) != 11 {
		t.Fatalf("%d requests for the large file (%q); want one for each of its 11 parts", len(seen.ranges), seen.ranges)
	}
	for _, rng := range []string{"bytes=0-65535", "bytes=589824-655359", "bytes=655360-655482"} {
		if seen.count(rng) != 1 {
			t.Errorf("range %s asked for %d times; want once (all: %q)", rng, seen.count(rng), seen.ranges)
		}
	}
	// The manifest and the summary hold the same digest as a fetch of the
	// file in one piece.
	m, err := readManifest(o.Dest)
	if err != nil {
		t.Fatal(err)
	}
	want := blake3Hex(files[largeFileKey])
	for _, f := range m.Files {
		if f.Path == largeFileKey && f.BLAKE3 != want {
			t.Errorf("manifest BLAKE3 %s; want %s", f.BLAKE3, want)
		}
	}
	o2, _ := testOptions(t, "s3://models/m", s3.creds(t, testAccessKey, testSecretKey))
	whole, err := Run(context.Background(), o2)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Digest != whole.Digest {
		t.Errorf("digest %s as ranges, %s whole", sum.Digest, whole.Digest)
	}
}

func TestAFailedPartIsRetriedAlone(t *testing.T) {
	s3 := newFakeS3(t)
	files := largeModel()
	s3.put(t, "m", files)
	const broken = "bytes=131072-196607"
	var (
		seen   rangesOf
		mu     sync.Mutex
		failed bool
	)
	s3.setFault(func(r *http.Request) int {
		seen.record(r)
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path == largeFilePath && r.Header.Get("Range") == broken && !failed {
			failed = true
			return http.StatusServiceUnavailable
		}
		return 0
	})
	o, logs := testOptions(t, "s3://models/m", s3.creds(t, testAccessKey, testSecretKey))
	o.partSize = testPartSize
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	assertTree(t, o.Dest, files)
	if n := seen.count(broken); n != 2 {
		t.Errorf("the failed part asked for %d times; want 2", n)
	}
	if len(seen.ranges) != 12 {
		t.Errorf("%d requests for the large file; want its 11 parts and one retry", len(seen.ranges))
	}
	if n := strings.Count(logs.String(), `"msg":"retrying"`); n != 1 {
		t.Errorf("%d retries logged; want 1", n)
	}
	if !strings.Contains(logs.String(), "(bytes 131072-196607)") {
		t.Errorf("the retry does not name the part: %s", logs)
	}
}

func TestAnObjectReplacedDuringARangedDownloadIsNotStitched(t *testing.T) {
	s3 := newFakeS3(t)
	// Without a version listed, only the parts' versions tell.
	s3.unversionedListing = true
	files := largeModel()
	s3.put(t, "m", files)
	replacement := bytes.Repeat([]byte{7}, len(files[largeFileKey]))
	var (
		mu    sync.Mutex
		parts int
	)
	s3.setFault(func(r *http.Request) int {
		mu.Lock()
		defer mu.Unlock()
		if r.Method == http.MethodGet && r.URL.Path == largeFilePath {
			if parts++; parts == 4 {
				if _, err := s3.backend.PutObject(testBucket, "m/"+largeFileKey, map[string]string{}, bytes.NewReader(replacement), int64(len(replacement)), nil); err != nil {
					t.Error(err)
				}
			}
		}
		return 0
	})
	o, _ := testOptions(t, "s3://models/m", s3.creds(t, testAccessKey, testSecretKey))
	wantNoStitch(t, o)
}

// TestAnObjectChangedSinceItWasListedIsNotTakenForTheListedVersion: a
// file replaced between the listing and its download, whole or as
// ranges, would be recorded with the version listed and later taken from
// the volume for it; the fetch ends at once, to list again on its next
// attempt, rather than retry a request that gets the same answer.
func TestAnObjectChangedSinceItWasListedIsNotTakenForTheListedVersion(t *testing.T) {
	for name, key := range map[string]string{"whole": "1/saved_model.pb", "as ranges": largeFileKey} {
		t.Run(name, func(t *testing.T) {
			s3 := newFakeS3(t)
			s3.put(t, "m", largeModel())
			var gets atomic.Int32
			s3.setFault(func(r *http.Request) int {
				if r.Method == http.MethodGet && r.URL.Path == "/models/m/"+key && gets.Add(1) == 1 {
					replacement := []byte("a model written again, of another size")
					if key == largeFileKey {
						replacement = bytes.Repeat([]byte{7}, len(largeModel()[largeFileKey]))
					}
					if _, err := s3.backend.PutObject(testBucket, "m/"+key, map[string]string{}, bytes.NewReader(replacement), int64(len(replacement)), nil); err != nil {
						t.Error(err)
					}
				}
				return 0
			})
			o, _ := testOptions(t, "s3://models/m", s3.creds(t, testAccessKey, testSecretKey))
			o.partSize = testPartSize
			_, err := Run(context.Background(), o)
			fe := wantFailure(t, err, servingv1alpha1.ReasonFetchFailed, ExitTransient)
			if !strings.Contains(fe.Message, "the object changed since it was listed (listed as version") {
				t.Errorf("message %q does not say the object changed since the listing", fe.Message)
			}
			if n := gets.Load(); key != largeFileKey && n != 1 {
				t.Errorf("%d GETs of the file; want 1: another gets the same version", n)
			}
			assertNotPublished(t, o.Dest)
		})
	}
}

func TestAnETagIsTheSameVersionWithOrWithoutItsQuotes(t *testing.T) {
	if !sameVersion(`"5ffd25bd"`, "5ffd25bd") || sameVersion(`"5ffd25bd"`, `"68586ab5"`) {
		t.Error("sameVersion compares ETags by more than their quotes, or not at all")
	}
}

// wantNoStitch fetches a model whose large file the source replaces
// when its fourth part is asked for, one part at a time (three parts of
// one version, the rest of the other), and checks that the fetch fails
// and publishes nothing.
func wantNoStitch(t *testing.T, o Options) {
	t.Helper()
	o.partSize = testPartSize
	o.Concurrency = 1
	_, err := Run(context.Background(), o)
	fe := wantFailure(t, err, servingv1alpha1.ReasonFetchFailed, ExitTransient)
	// A source that lists versions says the part is not of the version
	// listed, before the parts are compared.
	if !strings.Contains(fe.Message, "changed during the fetch") && !strings.Contains(fe.Message, "changed since it was listed") {
		t.Errorf("message %q does not say the object changed", fe.Message)
	}
	assertNotPublished(t, o.Dest)
}

func TestHashInOrderHashesPartsWrittenInAnyOrder(t *testing.T) {
	data := patterned(5*1000+17, 7)
	f := emptyFile(t)
	const partSize = 1000
	written := make(chan int, 6)
	go func() {
		for _, i := range []int{5, 2, 0, 4, 1, 3} {
			off := i * partSize
			if _, err := f.WriteAt(data[off:min(off+partSize, len(data))], int64(off)); err != nil {
				t.Error(err)
			}
			written <- i
		}
	}()
	h := sha256.New()
	if err := hashInOrder(context.Background(), h, f, int64(len(data)), partSize, written); err != nil {
		t.Fatal(err)
	}
	if want := sha256.Sum256(data); hex.EncodeToString(h.Sum(nil)) != hex.EncodeToString(want[:]) {
		t.Errorf("sha256 %x; want %x", h.Sum(nil), want)
	}
}

// Parts of whole pages are hashed where they lie in the page cache; the
// hash is the same.
func TestHashInOrderHashesPageAlignedParts(t *testing.T) {
	partSize := 2 * os.Getpagesize()
	data := patterned(5*partSize+17, 11)
	f := emptyFile(t)
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	written := make(chan int, 6)
	for _, i := range []int{3, 0, 5, 1, 4, 2} {
		written <- i
	}
	h := sha256.New()
	if err := hashInOrder(context.Background(), h, f, int64(len(data)), int64(partSize), written); err != nil {
		t.Fatal(err)
	}
	if want := sha256.Sum256(data); hex.EncodeToString(h.Sum(nil)) != hex.EncodeToString(want[:]) {
		t.Errorf("sha256 %x; want %x", h.Sum(nil), want)
	}
}

// A range the file does not hold is an error, not a crash.
func TestHashingARangeBeyondTheFileFails(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "file"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	page := os.Getpagesize()
	if _, err := f.Write(make([]byte, page)); err != nil {
		t.Fatal(err)
	}
	err = hashFileRange(sha256.New(), f, 0, int64(3*page), make([]byte, page))
	if err == nil {
		t.Fatal("hashing 3 pages of a file of 1 succeeded")
	}
	t.Log(err)
}

// A range longer than the mapped window is hashed window by window.
func TestHashingARangeOfManyWindows(t *testing.T) {
	data := patterned(9<<20+123, 5)
	path := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if err := hashFileRange(h, f, 0, int64(len(data)), make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	if want := sha256.Sum256(data); !bytes.Equal(h.Sum(nil), want[:]) {
		t.Error("the hash of the range is not the file's")
	}
}

// patterned is n bytes, byte i being i*step: not all zeros, so a part left
// unwritten changes the hash.
func patterned(n, step int) []byte {
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i * step)
	}
	return data
}

// emptyFile is a new file in the test's directory, closed when it ends.
func emptyFile(t *testing.T) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "file"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

func TestPartsInFlightAreTheRequestsUpToFourPerCPU(t *testing.T) {
	for _, c := range []struct{ requests, cpus, want int }{
		{16, 2, 8},
		{16, 8, 16},
		{3, 2, 3},
		{16, 1, 4},
		{0, 2, 1},
	} {
		if got := partsInFlight(c.requests, c.cpus); got != c.want {
			t.Errorf("partsInFlight(%d requests, %d CPUs) = %d; want %d", c.requests, c.cpus, got, c.want)
		}
	}
}
