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

	"github.com/fsouza/fake-gcs-server/fakestorage"
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

// TestARefetchOfASavedModelWithoutAVersionDirectoryDownloadsOnlyWhatChanged:
// a SavedModel at the top of the prefix is served as version 1, and its
// files, listed without that directory, are found there by a refetch.
func TestARefetchOfASavedModelWithoutAVersionDirectoryDownloadsOnlyWhatChanged(t *testing.T) {
	s3 := newFakeS3(t)
	files := map[string][]byte{"saved_model.pb": []byte("graph"), "variables/variables.index": []byte("index"),
		"variables/variables.data-00000-of-00001": bytes.Repeat([]byte("w"), 5000)}
	s3.put(t, "bare", files)
	creds := s3.creds(t, testAccessKey, testSecretKey)
	models := t.TempDir()
	for _, gen := range []string{"0000000a", "0000000b"} {
		o, logs := testOptions(t, "s3://models/bare", creds)
		o.Dest = filepath.Join(models, gen)
		before := s3.count("GET", "/models/bare/")
		if _, err := Run(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		assertTree(t, o.Dest, prefixed("1/", files))
		if n := s3.count("GET", "/models/bare/") - before; gen == "0000000b" && n != 1 {
			t.Errorf("the refetch downloaded %d files; want the one changed\n%s", n, logs)
		}
		s3.put(t, "bare", map[string][]byte{"variables/variables.index": []byte("index 2")})
		files["variables/variables.index"] = []byte("index 2")
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

// TestAnArchiveOverHTTPOfTheSameETagIsTakenFromTheCopyFetchedBefore: a
// refresh round of an http(s):// archive whose server still names it by
// the strong ETag the earlier copy came with asks for a kilobyte and links
// that copy; a new ETag, or a weak one, downloads the archive, and the
// copy records the ETag its bytes came with, not the one asked first.
func TestAnArchiveOverHTTPOfTheSameETagIsTakenFromTheCopyFetchedBefore(t *testing.T) {
	for name, c := range map[string]*etagRounds{
		"whole":                       {path: "/m.tar.gz"},
		"in parts":                    {path: "/m.tar.gz", parts: true},
		"a URL that names no archive": {path: "/download", asks: 1},
	} {
		t.Run(name, c.run)
	}
}

// etagRounds fetches, round after round, the archive a web server serves
// at path into generations side by side.
type etagRounds struct {
	path  string
	parts bool
	// asks is how often each round asks for the first kilobyte anyway:
	// List does for a URL that names no archive.
	asks int64

	current atomic.Pointer[etagVersion]
	// afterAsk, when set, runs once the server has answered the ask for
	// the first kilobyte.
	afterAsk        atomic.Pointer[func()]
	asked, download atomic.Int64
	srv             *httptest.Server
	models          string
}

type etagVersion struct {
	files map[string][]byte
	body  []byte
	etag  string
}

func (c *etagRounds) run(t *testing.T) {
	c.srv = httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.srv.Close)
	c.models = t.TempDir()
	version := func(files map[string][]byte, etag string) *etagVersion {
		return &etagVersion{files: files, body: tarball(t, true, entries(files)), etag: etag}
	}

	v1 := version(largeModel(), `"v1"`)
	c.current.Store(v1)
	first, m := c.round(t, "0000000a", v1)
	if c.asked.Load() != c.asks || m.ArchiveVersion != `"v1"` {
		t.Errorf("the first fetch asked for the first kilobyte %d times and recorded ETag %q; want %d asks and \"v1\"", c.asked.Load(), m.ArchiveVersion, c.asks)
	}

	// The same ETag: a kilobyte asked for, once, the copy linked.
	again, m := c.round(t, "0000000b", v1)
	if c.asked.Load() != 1 || c.download.Load() != 0 || !c.linked("0000000a", "0000000b") {
		t.Errorf("the same ETag: %d asks, %d downloads, linked %v; want 1 ask, no download, the earlier copy linked",
			c.asked.Load(), c.download.Load(), c.linked("0000000a", "0000000b"))
	}
	if again.Digest != first.Digest || m.ArchiveVersion != `"v1"` {
		t.Errorf("the linked copy: digest %s (first %s), ETag %q", again.Digest, first.Digest, m.ArchiveVersion)
	}
	if first.Received < int64(len(v1.body)) || again.Received > 8<<10 {
		t.Errorf("received %d bytes, then %d; want the %d of the archive, then a kilobyte and the answer's framing", first.Received, again.Received, len(v1.body))
	}

	// Replaced between the ask and the download: the copy is of what
	// came, and records its ETag.
	v2, v3 := version(model(2), `"v2"`), version(model(3), `"v3"`)
	c.current.Store(v2)
	swap := func() { c.current.Store(v3) }
	c.afterAsk.Store(&swap)
	if _, m = c.round(t, "0000000c", v3); c.asked.Load() != 1 || c.download.Load() == 0 || m.ArchiveVersion != `"v3"` {
		t.Errorf("replaced after the ask: %d asks, %d downloads, ETag %q recorded; want 1 ask, a download, \"v3\"", c.asked.Load(), c.download.Load(), m.ArchiveVersion)
	}
	if c.round(t, "0000000d", v3); c.download.Load() != 0 {
		t.Errorf("the ETag recorded from the download: the next round downloaded %d times, want none", c.download.Load())
	}

	// A weak ETag may name other bytes as well: downloaded, and recorded
	// as none, so the next round asks nothing first.
	v4 := version(model(4), `W/"v4"`)
	c.current.Store(v4)
	if _, m = c.round(t, "0000000e", v4); c.download.Load() == 0 || m.ArchiveVersion != "" {
		t.Errorf("a weak ETag: %d downloads, ETag %q recorded; want a download and none recorded", c.download.Load(), m.ArchiveVersion)
	}
	if c.round(t, "0000000f", v4); c.asked.Load() != c.asks || c.download.Load() == 0 {
		t.Errorf("after a weak ETag: %d asks, %d downloads; want %d asks, a download", c.asked.Load(), c.download.Load(), c.asks)
	}
}

func (c *etagRounds) serve(w http.ResponseWriter, r *http.Request) {
	v := c.current.Load()
	if v.etag != "" {
		w.Header().Set("ETag", v.etag)
	}
	http.ServeContent(w, r, "m.tar.gz", time.Time{}, bytes.NewReader(v.body))
	if r.Header.Get("Range") != "bytes=0-1023" {
		c.download.Add(1)
		return
	}
	c.asked.Add(1)
	if f := c.afterAsk.Swap(nil); f != nil {
		(*f)()
	}
}

// round fetches into generation gen, which must then hold want's files,
// counting the requests afresh.
func (c *etagRounds) round(t *testing.T, gen string, want *etagVersion) (Summary, manifest) {
	t.Helper()
	o, logs := testOptions(t, c.srv.URL+c.path, "")
	o.Dest = filepath.Join(c.models, gen)
	if c.parts {
		o.partSize, o.Concurrency = testPartSize, 4
	}
	c.asked.Store(0)
	c.download.Store(0)
	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("%s: %v\n%s", gen, err, logs)
	}
	assertTree(t, o.Dest, want.files)
	m, err := readManifest(o.Dest)
	if err != nil {
		t.Fatal(err)
	}
	return sum, m
}

// linked says that generations a and b hold the same large file.
func (c *etagRounds) linked(a, b string) bool {
	x, _ := os.Stat(filepath.Join(c.models, a, largeFileKey))
	y, _ := os.Stat(filepath.Join(c.models, b, largeFileKey))
	return x != nil && y != nil && os.SameFile(x, y)
}

// TestAnArchiveInAnObjectStoreUnchangedSinceItsCopyIsNotDownloaded: a
// refetch of an archive S3, GCS or Azure still names by the version its
// copy beside the destination was downloaded as (ETag, generation) links
// that copy; the archive replaced, it is downloaded.
func TestAnArchiveInAnObjectStoreUnchangedSinceItsCopyIsNotDownloaded(t *testing.T) {
	for name, store := range map[string]func(t *testing.T) archiveStore{
		"S3": func(t *testing.T) archiveStore {
			s3 := newFakeS3(t)
			return archiveStore{
				uri: "s3://" + testBucket + "/m.tar.gz", creds: s3.creds(t, testAccessKey, testSecretKey),
				put:       func(body []byte) { s3.put(t, "", map[string][]byte{"m.tar.gz": body}) },
				downloads: func() int { return s3.count("GET", "/"+testBucket+"/m.tar.gz") },
			}
		},
		"GCS": func(t *testing.T) archiveStore {
			gcs := newFakeGCS(t)
			var downloads atomic.Int32
			gcs.seen = func(r *http.Request) {
				if r.URL.Query().Get("alt") == "media" || strings.HasPrefix(r.URL.Path, "/"+testBucket+"/") {
					downloads.Add(1)
				}
			}
			return archiveStore{
				uri: "gs://" + testBucket + "/m.tar.gz", creds: secretDir(t, map[string]string{KeyGCSEndpointURL: gcs.URL}),
				put: func(body []byte) {
					gcs.store.CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: testBucket, Name: "m.tar.gz"}, Content: body})
				},
				downloads: func() int { return int(downloads.Load()) },
			}
		},
		"Azure": func(t *testing.T) archiveStore {
			srv := startAzure(t, false)
			var downloads atomic.Int32
			keys := azureKeys(srv)
			keys[KeyAzureBlobEndpoint] = throughHook(t, srv, func(r *http.Request) {
				if r.Method == http.MethodGet && !r.URL.Query().Has("comp") {
					downloads.Add(1)
				}
			})
			return archiveStore{
				uri: azureModels + "/m.tar.gz", creds: secretDir(t, keys),
				put:       func(body []byte) { srv.Put("models", "m.tar.gz", body) },
				downloads: func() int { return int(downloads.Load()) },
			}
		},
	} {
		t.Run(name, func(t *testing.T) { store(t).rounds(t) })
	}
}

// archiveStore is an object store holding an archive at uri, which put
// replaces; downloads counts the requests for it.
type archiveStore struct {
	uri, creds string
	put        func(body []byte)
	downloads  func() int
}

func (s archiveStore) rounds(t *testing.T) {
	models := t.TempDir()
	fetch := func(gen string, want map[string][]byte) (int, manifest) {
		t.Helper()
		o, logs := testOptions(t, s.uri, s.creds)
		o.Dest = filepath.Join(models, gen)
		before := s.downloads()
		if _, err := Run(context.Background(), o); err != nil {
			t.Fatalf("%s: %v\n%s", gen, err, logs)
		}
		assertTree(t, o.Dest, want)
		m, err := readManifest(o.Dest)
		if err != nil {
			t.Fatal(err)
		}
		return s.downloads() - before, m
	}
	s.put(tarball(t, true, entries(model(1))))
	if n, m := fetch("0000000a", model(1)); n == 0 || m.ArchiveVersion == "" {
		t.Fatalf("the first fetch: %d downloads, version %q recorded; want a download and a version", n, m.ArchiveVersion)
	}
	if n, _ := fetch("0000000b", model(1)); n != 0 {
		t.Errorf("the archive unchanged: %d downloads, want none", n)
	}
	a, _ := os.Stat(filepath.Join(models, "0000000a", "1", "saved_model.pb"))
	b, _ := os.Stat(filepath.Join(models, "0000000b", "1", "saved_model.pb"))
	if a == nil || b == nil || !os.SameFile(a, b) {
		t.Error("the refetched model's files are not the earlier copy's, linked")
	}
	s.put(tarball(t, true, entries(model(2))))
	if n, _ := fetch("0000000c", model(2)); n == 0 {
		t.Error("the archive replaced: not downloaded")
	}
}
