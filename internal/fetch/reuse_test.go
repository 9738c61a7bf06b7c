package fetch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestARefetchDownloadsOnlyWhatChanged: a fetch of a URI fetched before
// into another generation takes the files the store lists unchanged from
// the earlier copy, linked, and downloads the new and the overwritten
// ones; the model and its digest are those a fresh fetch makes.
func TestARefetchDownloadsOnlyWhatChanged(t *testing.T) {
	s3 := newFakeS3(t)
	files := model(1)
	files["1/variables/variables.data-00000-of-00001"] = bytes.Repeat([]byte("w"), int(chunkedMinSize)+5) // hashed by chunks
	s3.put(t, "m", files)
	creds := s3.creds(t, testAccessKey, testSecretKey)
	models := t.TempDir()
	fetchInto := func(dir, gen string) (Summary, *logBuffer) {
		t.Helper()
		o, logs := testOptions(t, "s3://models/m", creds)
		o.Dest = filepath.Join(dir, gen)
		sum, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		return sum, logs
	}
	fetchInto(models, "0000000a")

	// Version 2 is added, and version 1's assets overwritten at the same
	// size: both are downloaded, the rest of version 1 is not.
	changed := model(2)
	changed["1/assets/vocab.txt"] = []byte("x\ny\nz\n")
	s3.put(t, "m", changed)
	for k, v := range changed {
		files[k] = v
	}
	before := len(s3.requests)
	sum, logs := fetchInto(models, "0000000b")
	var got []string
	for _, r := range s3.requests[before:] {
		if strings.HasPrefix(r, "GET ") {
			got = append(got, strings.TrimPrefix(r, "GET /models/m/"))
		}
	}
	for _, r := range got {
		if !strings.HasPrefix(r, "2/") && r != "1/assets/vocab.txt" {
			t.Errorf("downloaded %s, unchanged in the store (all downloads: %q)\n%s", r, got, logs)
		}
	}
	if strings.Contains(logs.String(), "no longer matches") {
		t.Errorf("a file changed in the store was taken for a damaged copy:\n%s", logs)
	}
	// The linked files, untouched since, are not read again.
	if !strings.Contains(logs.String(), `"hashedAgain":0,`) {
		t.Errorf("files linked untouched were hashed again:\n%s", logs)
	}
	if len(got) != len(changed) {
		t.Errorf("downloaded %q, want the %d files changed", got, len(changed))
	}
	assertTree(t, filepath.Join(models, "0000000b"), files)
	for _, p := range []string{"1/saved_model.pb", "1/variables/variables.data-00000-of-00001"} {
		a, _ := os.Stat(filepath.Join(models, "0000000a", p))
		b, _ := os.Stat(filepath.Join(models, "0000000b", p))
		if a == nil || b == nil || !os.SameFile(a, b) {
			t.Errorf("%s is not the earlier model's file, linked", p)
		}
	}
	fresh, _ := fetchInto(t.TempDir(), "0000000c")
	if sum.Digest != fresh.Digest {
		t.Errorf("the model taken partly from the earlier one has digest %s, a fresh fetch %s", sum.Digest, fresh.Digest)
	}
}

// TestAFileDamagedInTheEarlierModelIsDownloaded: an earlier copy that no
// longer hashes to its manifest is downloaded, not linked.
func TestAFileDamagedInTheEarlierModelIsDownloaded(t *testing.T) {
	s3 := newFakeS3(t)
	files := model(1)
	s3.put(t, "m", files)
	creds := s3.creds(t, testAccessKey, testSecretKey)
	models := t.TempDir()
	for i, gen := range []string{"0000000a", "0000000b"} {
		o, logs := testOptions(t, "s3://models/m", creds)
		o.Dest = filepath.Join(models, gen)
		if _, err := Run(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			p := filepath.Join(o.Dest, "1", "saved_model.pb")
			if err := os.WriteFile(p, bytes.Repeat([]byte("x"), len(files["1/saved_model.pb"])), 0o644); err != nil {
				t.Fatal(err)
			}
			// The file system's clock is coarse (a few ms): make the
			// write as late as any real one is.
			later := time.Now().Add(time.Second)
			if err := os.Chtimes(p, later, later); err != nil {
				t.Fatal(err)
			}
			continue
		}
		assertTree(t, o.Dest, files)
		if n := s3.count("GET", "/models/m/1/saved_model.pb"); n != 2 {
			t.Errorf("the damaged file was downloaded %d times in all, want 2\n%s", n, logs)
		}
		if n := s3.count("GET", "/models/m/1/assets/vocab.txt"); n != 1 {
			t.Errorf("an intact file was downloaded %d times in all, want once", n)
		}
	}
}

// TestAFileWithoutARecordedTimeIsHashedAgain: a model published by a
// fetcher that recorded no modification times has its linked files
// hashed again, not trusted.
func TestAFileWithoutARecordedTimeIsHashedAgain(t *testing.T) {
	earlierDir, staging := t.TempDir(), t.TempDir()
	writeTree(t, earlierDir, map[string][]byte{"1/a": []byte("a"), "1/b": []byte("b")})
	records, err := hashFiles(context.Background(), earlierDir, []string{"1/a", "1/b"}, manifestFormat, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := stampModTimes(earlierDir, records[:1]); err != nil {
		t.Fatal(err)
	}
	e := &earlier{dir: earlierDir, files: map[string]fileRecord{}}
	var objs []Object
	for _, r := range records {
		r.Source = "v1"
		e.files[r.Path] = r
		objs = append(objs, Object{Key: r.Path, Size: r.Size, Version: "v1"})
	}
	logs := &logBuffer{}
	linked, rest, err := e.linkUnchanged(context.Background(), staging, objs, 2, testLogger(logs))
	if err != nil || len(linked) != 2 || len(rest) != 0 {
		t.Fatalf("linked %v, to download %v, %v; want both linked", linked, rest, err)
	}
	if !strings.Contains(logs.String(), `"hashedAgain":1,`) {
		t.Errorf("want the file without a recorded time, alone, hashed again:\n%s", logs)
	}
}

// TestALinkThatFailsHasEveryFileDownloaded: where a link cannot be made
// (a file system without hard links), the links already made are removed
// and every object is left to download.
func TestALinkThatFailsHasEveryFileDownloaded(t *testing.T) {
	earlierDir, staging := t.TempDir(), t.TempDir()
	writeTree(t, earlierDir, map[string][]byte{"1/a": []byte("a"), "1/b": []byte("b")})
	writeTree(t, staging, map[string][]byte{"1/b": []byte("in the way")})
	e := &earlier{dir: earlierDir, files: map[string]fileRecord{
		"1/a": {Path: "1/a", Size: 1, Source: "v1"},
		"1/b": {Path: "1/b", Size: 1, Source: "v1"},
	}}
	objs := []Object{{Key: "1/a", Size: 1, Version: "v1"}, {Key: "1/b", Size: 1, Version: "v1"}}
	linked, rest, err := e.linkUnchanged(context.Background(), staging, objs, 2, testLogger(&logBuffer{}))
	if err != nil || linked != nil || len(rest) != 2 {
		t.Fatalf("linked %v, to download %v, %v; want none linked, both to download", linked, rest, err)
	}
	if _, err := os.Lstat(filepath.Join(staging, "1", "a")); !os.IsNotExist(err) {
		t.Errorf("the link made before the failure was left in staging: %v", err)
	}
}

// TestARefetchOfTheSameContentDownloadsNothing: a model whose URI names
// its content (an oci:// tag still naming the same image, an archive
// pinned by #sha256) is linked whole from its earlier copy; a tag moved
// to another image is pulled.
func TestARefetchOfTheSameContentDownloadsNothing(t *testing.T) {
	files := model(1, 2)
	reg := newTestRegistry(t, "")
	_, image := pushModelImage(t, reg, files)
	archive := tarball(t, true, entries(files))
	var archiveGets atomic.Int64
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		archiveGets.Add(1)
		http.ServeContent(w, r, "m.tar.gz", time.Time{}, bytes.NewReader(archive))
	}))
	t.Cleanup(web.Close)
	sum := sha256.Sum256(archive)
	pinned := web.URL + "/m.tar.gz#sha256=" + hex.EncodeToString(sum[:])

	for name, c := range map[string]struct {
		uri       string
		downloads func() int64
	}{
		"oci tag":        {image, reg.blobs.Load},
		"pinned archive": {pinned, archiveGets.Load},
	} {
		t.Run(name, func(t *testing.T) {
			models := t.TempDir()
			var digests []string
			for i, gen := range []string{"0000000a", "0000000b"} {
				o, logs := testOptions(t, c.uri, "")
				o.Dest = filepath.Join(models, gen)
				before := c.downloads()
				got, err := Run(context.Background(), o)
				if err != nil {
					t.Fatal(err)
				}
				if n := c.downloads() - before; i == 1 && n != 0 {
					t.Errorf("the refetch downloaded %d times\n%s", n, logs)
				}
				assertTree(t, o.Dest, files)
				digests = append(digests, got.Digest)
			}
			if digests[0] != digests[1] {
				t.Errorf("digests %q differ", digests)
			}
			a, _ := os.Stat(filepath.Join(models, "0000000a", "1", "saved_model.pb"))
			b, _ := os.Stat(filepath.Join(models, "0000000b", "1", "saved_model.pb"))
			if a == nil || b == nil || !os.SameFile(a, b) {
				t.Error("the refetched model's files are not the earlier copy's, linked")
			}
		})
	}

	// The tag now names another image: it is pulled.
	moved := model(3)
	_, image = pushModelImage(t, reg, moved)
	models := t.TempDir()
	for _, gen := range []string{"0000000a", "0000000b"} {
		o, _ := testOptions(t, image, "")
		o.Dest = filepath.Join(models, gen)
		if gen == "0000000b" {
			_, _ = pushModelImage(t, reg, files)
		}
		before := reg.blobs.Load()
		if _, err := Run(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		if reg.blobs.Load() == before {
			t.Errorf("%s: the image the tag names now was not pulled", gen)
		}
	}
}
