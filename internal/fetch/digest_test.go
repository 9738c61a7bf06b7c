package fetch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/zeebo/blake3"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// randomBytes is n bytes no two chunks of which are alike.
func randomBytes(n int, seed uint64) []byte {
	var s [32]byte
	s[0] = byte(seed)
	b := make([]byte, n)
	_, _ = rand.NewChaCha8(s).Read(b)
	return b
}

// chunkedSHA256 is format 2's digest of a large file, computed as the
// format states it: the sha256 of its 16 MiB chunks' sha256 digests.
func chunkedSHA256(data []byte) string { return chunked(data, sha256.Sum256) }

// chunkedBLAKE3 is format 3's: the BLAKE3 of its chunks' BLAKE3 digests.
func chunkedBLAKE3(data []byte) string { return chunked(data, blake3.Sum256) }

func chunked(data []byte, sum func([]byte) [32]byte) string {
	var sums []byte
	for off := 0; off < len(data); off += int(digestChunkSize) {
		s := sum(data[off:min(off+int(digestChunkSize), len(data))])
		sums = append(sums, s[:]...)
	}
	s := sum(sums)
	return hex.EncodeToString(s[:])
}

func blake3Hex(b []byte) string {
	s := blake3.Sum256(b)
	return hex.EncodeToString(s[:])
}

// hashInPieces writes data to h in pieces of step bytes.
func hashInPieces(h *contentHash, data []byte, step int) {
	for off := 0; off < len(data); off += step {
		_, _ = h.Write(data[off:min(off+step, len(data))])
	}
}

func TestAFileBelowTheChunkedSizeIsRecordedByItsBLAKE3(t *testing.T) {
	for _, size := range []int{0, 1, int(digestChunkSize) + 5, int(chunkedMinSize) - 1} {
		data := randomBytes(size, 1)
		for _, known := range []int64{int64(size), -1} {
			h := newContentHash(known, false)
			hashInPieces(h, data, 1<<20+7)
			got := h.record(int64(size))
			if got != (fileRecord{Size: int64(size), BLAKE3: blake3Hex(data)}) {
				t.Errorf("%d bytes (size given %d): record %+v; want its BLAKE3 alone", size, known, got)
			}
		}
	}
}

func TestALargeFileIsRecordedByItsChunksDigests(t *testing.T) {
	for _, size := range []int{int(chunkedMinSize), int(chunkedMinSize) + 123} {
		data := randomBytes(size, 2)
		want := fileRecord{Size: int64(size), ChunkedBLAKE3: chunkedBLAKE3(data)}
		for _, step := range []int{1 << 20, 3<<20 + 11} {
			for _, known := range []int64{int64(size), -1} {
				h := newContentHash(known, false)
				hashInPieces(h, data, step)
				if got := h.record(int64(size)); got != want {
					t.Errorf("%d bytes in pieces of %d (size given %d): record %+v; want %+v", size, step, known, got, want)
				}
			}
		}
		// A pin asks for the plain sha256 beside the chunks.
		h := newContentHash(int64(size), true)
		hashInPieces(h, data, 1<<20)
		if h.pinnedSHA256() != sha256Hex(data) || h.record(int64(size)) != want {
			t.Errorf("%d bytes with a pin: sha256 %s, record %+v; want %s and %+v", size, h.pinnedSHA256(), h.record(int64(size)), sha256Hex(data), want)
		}
	}
}

func TestNoKindOfRecordIsTakenForAnother(t *testing.T) {
	kinds := map[string]fileRecord{
		"sha256":         {Path: "1/v", Size: chunkedMinSize, SHA256: "ab"},
		"chunked sha256": {Path: "1/v", Size: chunkedMinSize, ChunkedSHA256: "ab"},
		"blake3":         {Path: "1/v", Size: chunkedMinSize, BLAKE3: "ab"},
		"chunked blake3": {Path: "1/v", Size: chunkedMinSize, ChunkedBLAKE3: "ab"},
	}
	seen := map[string]string{}
	for kind, rec := range kinds {
		d := digestOf([]fileRecord{rec})
		if other, ok := seen[d]; ok {
			t.Errorf("a file's %s and its %s of the same hex give the same model digest", kind, other)
		}
		seen[d] = kind
	}
}

// largeS3Model is a model whose data file is 4 chunks and a bit: ranged
// with the default part size, and recorded by its chunks.
func largeS3Model() map[string][]byte {
	files := model(1)
	files[largeFileKey] = randomBytes(int(chunkedMinSize)+4097, 3)
	return files
}

func TestALargeFileHasOneDigestHoweverItIsFetched(t *testing.T) {
	s3 := newFakeS3(t)
	files := largeS3Model()
	s3.put(t, "m", files)
	creds := s3.creds(t, testAccessKey, testSecretKey)

	var ranged atomic.Int64
	s3.setFault(func(r *http.Request) int {
		if r.URL.Path == largeFilePath && r.Header.Get("Range") != "" {
			ranged.Add(1)
		}
		return 0
	})
	asRanges, _ := testOptions(t, "s3://models/m", creds)
	sum, err := Run(context.Background(), asRanges)
	if err != nil {
		t.Fatal(err)
	}
	if ranged.Load() != 5 {
		t.Fatalf("%d ranged requests for the large file; want one for each of its 5 parts", ranged.Load())
	}
	assertTree(t, asRanges.Dest, files)
	m, err := readManifest(asRanges.Dest)
	if err != nil {
		t.Fatal(err)
	}
	if m.Format != manifestFormat {
		t.Errorf("manifest format %d; want %d", m.Format, manifestFormat)
	}
	for _, f := range m.Files {
		want := fileRecord{Path: f.Path, Size: int64(len(files[f.Path])), BLAKE3: blake3Hex(files[f.Path])}
		if f.Path == largeFileKey {
			want = fileRecord{Path: f.Path, Size: want.Size, ChunkedBLAKE3: chunkedBLAKE3(files[f.Path])}
		}
		// The S3 listing's ETag, for a later fetch to take the file from here.
		if f.Source == "" {
			t.Errorf("manifest records no source version of %s", f.Path)
		}
		if f.ModTime == 0 {
			t.Errorf("manifest records no modification time of %s", f.Path)
		}
		if f.content() != want {
			t.Errorf("manifest records %+v; want %+v", f, want)
		}
	}

	whole, _ := testOptions(t, "s3://models/m", creds)
	whole.partSize = chunkedMinSize // the large file is fewer than 4 parts: one request
	before := ranged.Load()
	wholeSum, err := Run(context.Background(), whole)
	if err != nil {
		t.Fatal(err)
	}
	if ranged.Load() != before {
		t.Fatal("the large file was fetched as ranges; want one request")
	}
	if wholeSum.Digest != sum.Digest {
		t.Errorf("digest %s in one request, %s as ranges", wholeSum.Digest, sum.Digest)
	}

	// Small parts, not aligned with the chunks, hash the file in order.
	small, _ := testOptions(t, "s3://models/m", creds)
	small.partSize = 3 << 20
	smallSum, err := Run(context.Background(), small)
	if err != nil {
		t.Fatal(err)
	}
	if smallSum.Digest != sum.Digest {
		t.Errorf("digest %s in parts of 3 MiB, %s in parts of 16 MiB", smallSum.Digest, sum.Digest)
	}

	// A model verified in place, as on a claim, hashes the chunks apart.
	records, err := hashTree(context.Background(), asRanges.Dest, manifestFormat, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := digestOf(records); got != sum.Digest {
		t.Errorf("digest %s verified in place, %s fetched", got, sum.Digest)
	}
}

func TestAPinnedLargeFileIsCheckedAgainstItsSHA256(t *testing.T) {
	s3 := newFakeS3(t)
	data := randomBytes(int(chunkedMinSize)+1, 4)
	s3.put(t, "big", map[string][]byte{"weights.bin": data})
	creds := s3.creds(t, testAccessKey, testSecretKey)

	o, _ := testOptions(t, "s3://models/big/weights.bin#sha256="+strings.Repeat("0", 64), creds)
	_, err := Run(context.Background(), o)
	fe := wantFailure(t, err, servingv1alpha1.ReasonChecksumMismatch, ExitPermanent)
	if !strings.Contains(fe.Message, sha256Hex(data)) {
		t.Errorf("message %q does not name the file's sha256", fe.Message)
	}
	assertNothingPublished(t, o.Dest)

	// The right pin passes; the one file is then no SavedModel.
	o, _ = testOptions(t, "s3://models/big/weights.bin#sha256="+sha256Hex(data), creds)
	_, err = Run(context.Background(), o)
	if fe := AsError(err); fe == nil || fe.Reason == servingv1alpha1.ReasonChecksumMismatch {
		t.Errorf("with the file's own sha256 pinned: %v; want no checksum mismatch", err)
	}
}

func TestAManifestOfAnEarlierFormatStillFindsTheModelFetched(t *testing.T) {
	// Each record as the fetchers of that format wrote it.
	formats := map[int]func(path string, b []byte) fileRecord{
		1: func(p string, b []byte) fileRecord {
			return fileRecord{Path: p, Size: int64(len(b)), SHA256: sha256Hex(b)}
		},
		2: func(p string, b []byte) fileRecord {
			if int64(len(b)) >= chunkedMinSize {
				return fileRecord{Path: p, Size: int64(len(b)), ChunkedSHA256: chunkedSHA256(b)}
			}
			return fileRecord{Path: p, Size: int64(len(b)), SHA256: sha256Hex(b)}
		},
	}
	for format, recordOf := range formats {
		t.Run(fmt.Sprintf("format %d", format), func(t *testing.T) { checkEarlierFormat(t, format, recordOf) })
	}
}

func checkEarlierFormat(t *testing.T, format int, recordOf func(path string, b []byte) fileRecord) {
	s3 := newFakeS3(t)
	files := largeS3Model()
	s3.put(t, "m", files)
	o, logs := testOptions(t, "s3://models/m", s3.creds(t, testAccessKey, testSecretKey))
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	var records []fileRecord
	for p, b := range files {
		records = append(records, recordOf(p, b))
	}
	old := manifest{URI: "s3://models/m", Versions: []int64{1}, Bytes: 0, Digest: digestOf(records), Files: sortedRecords(records)}
	if format > 1 {
		old.Format = format // format 1 wrote none
	}
	b, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	if format == 1 && (bytes.Contains(b, []byte(`"format"`)) || bytes.Contains(b, []byte(`chunkedSha256`))) {
		t.Fatalf("a format-1 manifest reads %s", b)
	}
	writeTree(t, o.Dest, map[string][]byte{ManifestName: b})
	requests := len(s3.requests)

	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(s3.requests) - requests; n != 0 {
		t.Errorf("%d requests; want none: the model is fetched", n)
	}
	if sum.Digest != old.Digest {
		t.Errorf("digest %s; want the manifest's %s", sum.Digest, old.Digest)
	}
	if !strings.Contains(logs.String(), "nothing to download") {
		t.Error("the run did not say it skipped the download")
	}

	// The files are checked against it, by its format's hash: a changed
	// byte of the large file is found.
	damaged := append([]byte(nil), files[largeFileKey]...)
	damaged[len(damaged)/2] ^= 1
	writeTree(t, o.Dest, map[string][]byte{largeFileKey: damaged})
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if len(s3.requests) == requests {
		t.Fatal("a damaged file passed the manifest's check")
	}
	assertTree(t, o.Dest, files)

	// A manifest of a format this fetcher does not know is fetched again.
	old.Format = manifestFormat + 1
	b, _ = json.Marshal(old)
	writeTree(t, o.Dest, map[string][]byte{ManifestName: b})
	requests = len(s3.requests)
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if len(s3.requests) == requests {
		t.Error("a manifest of an unknown format was trusted")
	}
	if m, err := readManifest(o.Dest); err != nil || m.Format != manifestFormat {
		t.Errorf("manifest format %d (%v) after fetching again; want %d", m.Format, err, manifestFormat)
	}
}
