package fetch

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// archiveInStore puts a large model as one archive, name, in a fake S3
// whose requests for it seen records; it returns the model's files and
// the fetch's options, with parts of testPartSize.
func archiveInStore(t *testing.T, name string, archive func(t testing.TB, es []archiveEntry) []byte, seen *rangesOf) (*fakeS3, map[string][]byte, Options, *logBuffer) {
	t.Helper()
	s3 := newFakeS3(t)
	files := largeModel()
	s3.put(t, "", map[string][]byte{name: archive(t, entries(files))})
	s3.setFault(func(r *http.Request) int {
		if r.Method == http.MethodGet && r.URL.Path == "/"+testBucket+"/"+name {
			seen.add(r.Header.Get("Range"))
		}
		return 0
	})
	o, logs := testOptions(t, "s3://"+testBucket+"/"+name, s3.creds(t, testAccessKey, testSecretKey))
	o.partSize = testPartSize
	return s3, files, o, logs
}

func gzipTarball(t testing.TB, es []archiveEntry) []byte { return tarball(t, true, es) }

func plainTarball(t testing.TB, es []archiveEntry) []byte { return tarball(t, false, es) }

func TestALargeTarArchiveIsReadInPartsSeveralAtOnce(t *testing.T) {
	var seen rangesOf
	_, files, o, logs := archiveInStore(t, "m.tar.gz", gzipTarball, &seen)
	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	assertTree(t, o.Dest, files)
	if len(seen.ranges) < 10 || seen.count("") != 0 {
		t.Errorf("requests for the archive: %q; want one range for each of its parts", seen.ranges)
	}
	if !strings.Contains(logs.String(), "downloading an archive in ranges") {
		t.Errorf("the log does not say the archive was read in ranges:\n%s", logs)
	}

	// Pinned: the sha256 of the parts read is the archive's.
	archive := gzipTarball(t, entries(files))
	for pin, want := range map[string]string{sha256Hex(archive): "", strings.Repeat("0", 64): servingv1alpha1.ReasonChecksumMismatch} {
		p := o
		p.URI, p.Dest = o.URI+"#sha256="+pin, o.Dest+"-"+pin[:8]
		_, err := Run(context.Background(), p)
		if want == "" && err != nil {
			t.Errorf("pinned to its sha256: %v", err)
		} else if want != "" {
			wantFailure(t, err, want, ExitPermanent)
		}
	}

	// One request at a time: one download, and the same model.
	seen = rangesOf{}
	o.Dest += "-whole"
	o.Concurrency = 1
	whole, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(seen.ranges) != 1 || seen.ranges[0] != "" {
		t.Errorf("requests for the archive with Concurrency 1: %q; want one without a range", seen.ranges)
	}
	if sum.Digest != whole.Digest {
		t.Errorf("digest %s in parts, %s whole", sum.Digest, whole.Digest)
	}
}

func TestALargeZipArchiveIsDownloadedInRanges(t *testing.T) {
	var seen rangesOf
	_, files, o, logs := archiveInStore(t, "m.zip", zipball, &seen)
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	assertTree(t, o.Dest, files)
	if len(seen.ranges) < 10 || seen.count("") != 0 {
		t.Errorf("requests for the archive: %q; want one range for each of its parts", seen.ranges)
	}
}

// TestAnArchiveReplacedWhileReadInPartsIsReadAgain: parts of two versions
// (of one size) are never joined; the attempt fails, and the next reads
// the new one, whose version the copy records.
func TestAnArchiveReplacedWhileReadInPartsIsReadAgain(t *testing.T) {
	var seen rangesOf
	s3, _, o, logs := archiveInStore(t, "m.tar", plainTarball, &seen)
	o.Dest = filepath.Join(filepath.Dir(o.Dest), "0000000a")
	replacement := largeModel()
	replacement["1/assets/vocab.txt"] = []byte("x\ny\nz\n")
	archive := plainTarball(t, entries(replacement))
	var once sync.Once
	s3.setFault(func(r *http.Request) int {
		// The eighth part is asked for once the first is read: four at
		// most are ahead of the reader.
		if r.Method == http.MethodGet && strings.HasPrefix(r.Header.Get("Range"), "bytes=458752-") {
			once.Do(func() {
				if _, err := s3.backend.PutObject(testBucket, "m.tar", map[string]string{}, bytes.NewReader(archive), int64(len(archive)), nil); err != nil {
					t.Error(err)
				}
			})
		}
		return 0
	})
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	assertTree(t, o.Dest, replacement)
	if !strings.Contains(logs.String(), "changed during the fetch") {
		t.Errorf("the retry does not say the archive changed:\n%s", logs)
	}

	// The store names the archive by the replacement's ETag, which the
	// copy recorded: a refetch takes the copy.
	gets := s3.count("GET", "/"+testBucket+"/m.tar")
	o.Dest = filepath.Join(filepath.Dir(o.Dest), "0000000b")
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	assertTree(t, o.Dest, replacement)
	if n := s3.count("GET", "/"+testBucket+"/m.tar") - gets; n != 0 {
		t.Errorf("the refetch asked for the archive %d times; want none: the copy is of the version the store names", n)
	}
}
