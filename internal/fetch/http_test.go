package fetch

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// archiveEntry is an entry of a test archive: a file by default.
type archiveEntry struct {
	name string
	body []byte
	typ  byte // a tar type flag; 0 for a regular file
	link string
}

func entries(files map[string][]byte) []archiveEntry {
	names := keys(files)
	sort.Strings(names)
	out := make([]archiveEntry, len(names))
	for i, n := range names {
		out[i] = archiveEntry{name: n, body: files[n]}
	}
	return out
}

func prefixed(prefix string, files map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for n, b := range files {
		out[prefix+n] = b
	}
	return out
}

func tarball(t testing.TB, gz bool, es []archiveEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.Writer = &buf
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(&buf)
		w = zw
	}
	tw := tar.NewWriter(w)
	for _, e := range es {
		h := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: e.typ, Linkname: e.link, Format: tar.FormatPAX}
		if e.typ == 0 {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func zipball(t testing.TB, es []archiveEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range es {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		body := e.body
		if e.typ == tar.TypeSymlink {
			h.SetMode(os.ModeSymlink | 0o777)
			body = []byte(e.link)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// fileServer serves one file at every path, and counts requests. fault,
// when set, may answer instead: it returns true when it did.
type fileServer struct {
	*httptest.Server
	body     []byte
	requests atomic.Int32
	fault    func(n int32, w http.ResponseWriter, r *http.Request) bool
}

func serveFile(t testing.TB, body []byte) *fileServer {
	t.Helper()
	s := &fileServer{body: body}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := s.requests.Add(1)
		if s.fault != nil && s.fault(n, w, r) {
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(s.body)))
		_, _ = w.Write(s.body)
	}))
	t.Cleanup(s.Close)
	return s
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestFetchingArchivesOverHTTP(t *testing.T) {
	files := model(1, 2)
	cases := []struct {
		name    string
		archive []byte
	}{
		{"model.tar.gz", tarball(t, true, entries(files))},
		{"model.tgz", tarball(t, true, append([]archiveEntry{{name: "./", typ: tar.TypeDir}}, entries(prefixed("./", files))...))},
		{"model.tar", tarball(t, false, entries(files))},
		{"model.zip", zipball(t, entries(files))},
		// An archive of the model's directory: its top directory goes.
		{"wrapped.tar.gz", tarball(t, true, append([]archiveEntry{{name: "resnet/", typ: tar.TypeDir}}, entries(prefixed("resnet/", files))...))},
		{"wrapped.zip", zipball(t, entries(prefixed("resnet/", files)))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := serveFile(t, c.archive)
			uri := srv.URL + "/models/" + c.name + "#sha256=" + sha256Hex(c.archive)
			o, _ := testOptions(t, uri, "")
			sum, err := Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			assertTree(t, o.Dest, files)
			if sum.Files != int64(len(files)) || len(sum.Versions) != 2 {
				t.Errorf("summary %+v", sum)
			}
			// A re-run downloads nothing.
			if _, err := Run(context.Background(), o); err != nil {
				t.Fatal(err)
			}
			if n := srv.requests.Load(); n != 1 {
				t.Errorf("%d requests for two runs; want 1", n)
			}
		})
	}
}

func TestAnUnversionedModelArchiveIsServedAsVersion1(t *testing.T) {
	srv := serveFile(t, tarball(t, true, []archiveEntry{
		{name: "export/", typ: tar.TypeDir},
		{name: "export/saved_model.pbtxt", body: []byte("graph")},
		{name: "export/variables/", typ: tar.TypeDir},
	}))
	o, _ := testOptions(t, srv.URL+"/export.tar.gz", "")
	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	assertTree(t, o.Dest, map[string][]byte{"1/saved_model.pbtxt": []byte("graph")})
	if st, err := os.Stat(filepath.Join(o.Dest, "1", "variables")); err != nil || !st.IsDir() {
		t.Error("the empty variables/ directory is missing")
	}
	if len(sum.Versions) != 1 || sum.Versions[0] != 1 {
		t.Errorf("versions %v", sum.Versions)
	}
}

func TestHTTPHeadersFromTheSecretAreSentAndNeverShown(t *testing.T) {
	const token = "Bearer tok-5ecret-do-not-print-91"
	archive := tarball(t, true, entries(model(1)))
	srv := serveFile(t, archive)
	srv.fault = func(_ int32, w http.ResponseWriter, r *http.Request) bool {
		if r.Header.Get("Authorization") != token || r.Header.Get("X-Team") != "vision" {
			http.Error(w, "who are you, "+r.Header.Get("Authorization"), http.StatusUnauthorized)
			return true
		}
		return false
	}
	uri := srv.URL + "/m.tar.gz"

	o, _ := testOptions(t, uri, secretDir(t, map[string]string{KeyHTTPHeaders: "Authorization: " + token + "\n# a comment\nX-Team: vision\n"}))
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}

	o, logs := testOptions(t, uri, secretDir(t, map[string]string{KeyHTTPHeaders: "Authorization: Bearer tok-5ecret-wrong-value-00\n"}))
	_, err := Run(context.Background(), o)
	wantFailure(t, err, servingv1alpha1.ReasonAccessDenied, ExitPermanent)
	for _, secret := range []string{"tok-5ecret"} {
		if strings.Contains(TerminationMessage(Summary{}, err), secret) || strings.Contains(logs.String(), secret) {
			t.Errorf("a header value shows in the message or the logs")
		}
	}
}

// TestTheSecretsHeadersGoToTheModelsHostAlone: a server that redirects
// the download to another host (a CDN, a bucket's signed URL) has that
// host sent none of the Secret's headers, a redirect on its own host
// keeps them, and the model is fetched.
func TestTheSecretsHeadersGoToTheModelsHostAlone(t *testing.T) {
	const token = "Bearer tok-5ecret-do-not-forward-17"
	files := model(1)
	cdn := serveFile(t, tarball(t, true, entries(files)))
	var leaked atomic.Value
	leaked.Store("")
	cdn.fault = func(_ int32, _ http.ResponseWriter, r *http.Request) bool {
		if a, k := r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"); a != "" || k != "" {
			leaked.Store(a + " " + k)
		}
		return false
	}
	origin := serveFile(t, nil)
	origin.fault = func(_ int32, w http.ResponseWriter, r *http.Request) bool {
		switch {
		case r.Header.Get("Authorization") != token || r.Header.Get("X-Api-Key") != "k3y":
			http.Error(w, "who are you", http.StatusUnauthorized)
		case r.URL.Path == "/models/resnet.tar.gz":
			http.Redirect(w, r, "/files/resnet.tar.gz", http.StatusFound)
		default:
			http.Redirect(w, r, cdn.URL+"/signed/resnet.tar.gz?X-Goog-Signature=abc", http.StatusFound)
		}
		return true
	}
	o, logs := testOptions(t, origin.URL+"/models/resnet.tar.gz", secretDir(t, map[string]string{KeyHTTPHeaders: "Authorization: " + token + "\nX-Api-Key: k3y\n"}))
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	assertTree(t, o.Dest, files)
	if got := leaked.Load().(string); got != "" {
		t.Errorf("the CDN's host was sent the Secret's headers %q", got)
	}
	if cdn.requests.Load() == 0 || origin.requests.Load() < 2 {
		t.Errorf("%d requests to the origin, %d to the CDN; want the origin asked twice, with the headers, then the CDN", origin.requests.Load(), cdn.requests.Load())
	}
}

// TestASignedURLsSignatureNeverShowsInANetworkError: a transport error
// quotes its request's URL; the signature in a signed URL's query must
// not reach the message or the logs.
func TestASignedURLsSignatureNeverShowsInANetworkError(t *testing.T) {
	o, logs := testOptions(t, "http://127.0.0.1:1/m.tgz?X-Amz-Signature=c2lnbmF0dXJl", "")
	o.Retry.Attempts = 1
	_, err := Run(context.Background(), o)
	fe := wantFailure(t, err, servingv1alpha1.ReasonFetchFailed, ExitTransient)
	if !strings.Contains(fe.Message, "network error") {
		t.Errorf("message %q is not the network error's", fe.Message)
	}
	if msg := TerminationMessage(Summary{}, err); strings.Contains(msg, "c2lnbmF0dXJl") || strings.Contains(logs.String(), "c2lnbmF0dXJl") {
		t.Errorf("the signature shows: %s\n%s", msg, logs)
	}
}

func TestAPinnedChecksumThatDiffersIsRefused(t *testing.T) {
	for _, name := range []string{"m.tar.gz", "m.zip"} {
		t.Run(name, func(t *testing.T) {
			archive := tarball(t, true, entries(model(1)))
			if name == "m.zip" {
				archive = zipball(t, entries(model(1)))
			}
			srv := serveFile(t, archive)
			o, _ := testOptions(t, srv.URL+"/"+name+"#sha256="+sha256Hex([]byte("another archive")), "")
			_, err := Run(context.Background(), o)
			fe := wantFailure(t, err, servingv1alpha1.ReasonChecksumMismatch, ExitPermanent)
			if !strings.Contains(fe.Message, sha256Hex(archive)) {
				t.Errorf("message %q does not give the actual checksum", fe.Message)
			}
			if n := srv.requests.Load(); n != 1 {
				t.Errorf("%d downloads; a mismatch must not be retried", n)
			}
			assertNothingPublished(t, o.Dest)
		})
	}
}

func TestACorruptArchiveIsInvalidLayout(t *testing.T) {
	good := tarball(t, true, entries(model(1)))
	cases := map[string][]byte{
		"garbage.tar.gz":   []byte("this is not gzip at all"),
		"truncated.tar.gz": good[:len(good)/2],
		"garbage.tar":      bytes.Repeat([]byte("x"), 1500),
		"garbage.zip":      []byte("PK\x03\x04 but then nothing a zip needs"),
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			srv := serveFile(t, body)
			o, _ := testOptions(t, srv.URL+"/"+name, "")
			_, err := Run(context.Background(), o)
			fe := wantFailure(t, err, servingv1alpha1.ReasonInvalidLayout, ExitPermanent)
			if !strings.Contains(fe.Message, "not a valid") {
				t.Errorf("message %q does not say the archive is broken", fe.Message)
			}
			if n := srv.requests.Load(); n != 1 {
				t.Errorf("%d downloads; a corrupt archive must not be retried", n)
			}
			assertNothingPublished(t, o.Dest)
		})
	}
}

func TestABrokenConnectionIsRetriedNotTakenForACorruptArchive(t *testing.T) {
	files := model(1, 2)
	archive := tarball(t, true, entries(files))
	srv := serveFile(t, archive)
	srv.fault = func(n int32, w http.ResponseWriter, _ *http.Request) bool {
		if n > 1 {
			return false
		}
		// Announce the whole archive, send half, and hang up.
		w.Header().Set("Content-Length", fmt.Sprint(len(archive)))
		_, _ = w.Write(archive[:len(archive)/2])
		w.(http.Flusher).Flush()
		conn, _, _ := w.(http.Hijacker).Hijack()
		_ = conn.Close()
		return true
	}
	o, _ := testOptions(t, srv.URL+"/m.tar.gz", "")
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	assertTree(t, o.Dest, files)
	if n := srv.requests.Load(); n != 2 {
		t.Errorf("%d requests; want 2", n)
	}
}

func TestAStalledDownloadIsRetried(t *testing.T) {
	files := model(1)
	archive := tarball(t, false, entries(files))
	srv := serveFile(t, archive)
	srv.fault = func(n int32, w http.ResponseWriter, r *http.Request) bool {
		if n > 1 {
			return false
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(archive)))
		_, _ = w.Write(archive[:512])
		w.(http.Flusher).Flush()
		select { // then nothing
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
		return true
	}
	o, logs := testOptions(t, srv.URL+"/m.tar", "")
	o.StallTimeout = 100 * time.Millisecond
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	assertTree(t, o.Dest, files)
	if !strings.Contains(logs.String(), "no data received for 100ms") {
		t.Errorf("the stall is not logged:\n%s", logs)
	}
}

// TestAThrottlingServersRetryAfterIsHonoured: a server that answers 503
// with Retry-After is asked again no sooner than it said.
func TestAThrottlingServersRetryAfterIsHonoured(t *testing.T) {
	files := model(1)
	srv := serveFile(t, tarball(t, true, entries(files)))
	srv.fault = func(n int32, w http.ResponseWriter, _ *http.Request) bool {
		if n > 1 {
			return false
		}
		w.Header().Set("Retry-After", "1")
		http.Error(w, "slow down", http.StatusServiceUnavailable)
		return true
	}
	o, logs := testOptions(t, srv.URL+"/m.tar.gz", "")
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	assertTree(t, o.Dest, files)
	if !strings.Contains(logs.String(), `"in":"1s"`) || srv.requests.Load() != 2 {
		t.Errorf("%d requests; want a retry in the 1s the server asked for:\n%s", srv.requests.Load(), logs)
	}
}

func TestHTTPStatuses(t *testing.T) {
	archive := tarball(t, true, entries(model(1)))
	cases := []struct {
		name     string
		statuses []int // the first answers, then the file
		reason   string
		exit     int
		requests int32
	}{
		{"404", []int{404}, servingv1alpha1.ReasonNotFound, ExitPermanent, 1},
		{"410", []int{410}, servingv1alpha1.ReasonNotFound, ExitPermanent, 1},
		{"403", []int{403}, servingv1alpha1.ReasonAccessDenied, ExitPermanent, 1},
		{"400", []int{400}, servingv1alpha1.ReasonFetchFailed, ExitPermanent, 1},
		{"503 then 200", []int{503, 502}, "", 0, 3},
		{"always 503", []int{503, 503, 503, 503, 503}, servingv1alpha1.ReasonFetchFailed, ExitTransient, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := serveFile(t, archive)
			srv.fault = func(n int32, w http.ResponseWriter, _ *http.Request) bool {
				if int(n) <= len(c.statuses) {
					http.Error(w, "no", c.statuses[n-1])
					return true
				}
				return false
			}
			o, _ := testOptions(t, srv.URL+"/m.tar.gz", "")
			_, err := Run(context.Background(), o)
			if c.reason == "" {
				if err != nil {
					t.Fatal(err)
				}
			} else {
				wantFailure(t, err, c.reason, c.exit)
			}
			if n := srv.requests.Load(); n != c.requests {
				t.Errorf("%d requests; want %d", n, c.requests)
			}
		})
	}
}

// TestAnArchiveIsKnownByItsAnswerWhereTheURLDoesNotNameIt: a download URL
// that ends in /download or a version number, as Kaggle's and TF Hub's
// do, is an archive by the Content-Disposition the server names it in,
// or else by its first bytes; anything else stays a single file.
func TestAnArchiveIsKnownByItsAnswerWhereTheURLDoesNotNameIt(t *testing.T) {
	files := model(1)
	unversioned := map[string][]byte{}
	for name, data := range files {
		unversioned[strings.TrimPrefix(name, "1/")] = data
	}
	for _, tc := range []struct {
		name, path, disposition string
		archive                 []byte
	}{
		{"named by the server", "/api/v1/models/google/resnet/tensorFlow2/classification/2/download", `attachment; filename="resnet.tar.gz"`, tarball(t, true, entries(unversioned))},
		{"a gzip by its bytes", "/google/imagenet/resnet/classification/5", "", tarball(t, true, entries(unversioned))},
		{"a tar by its bytes", "/models/resnet/latest", "inline", tarball(t, false, entries(unversioned))},
		{"a zip by its bytes", "/models/resnet/download", `attachment; filename="../../etc/resnet"`, zipball(t, entries(unversioned))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := serveFile(t, tc.archive)
			srv.fault = func(_ int32, w http.ResponseWriter, r *http.Request) bool {
				if tc.disposition != "" {
					w.Header().Set("Content-Disposition", tc.disposition)
				}
				http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(tc.archive))
				return true
			}
			o, logs := testOptions(t, srv.URL+tc.path, "")
			sum, err := Run(context.Background(), o)
			if err != nil {
				t.Fatalf("%v\n%s", err, logs)
			}
			assertTree(t, o.Dest, files)
			if !slices.Equal(sum.Versions, []int64{1}) {
				t.Errorf("versions %v, want the unversioned model as 1", sum.Versions)
			}
		})
	}
}

func TestASingleFileIsNotAModel(t *testing.T) {
	srv := serveFile(t, []byte("graph"))
	o, _ := testOptions(t, srv.URL+"/files/model.pb", "")
	_, err := Run(context.Background(), o)
	fe := wantFailure(t, err, servingv1alpha1.ReasonInvalidLayout, ExitPermanent)
	if !strings.Contains(fe.Message, `"model.pb"`) {
		t.Errorf("message %q does not say what was found", fe.Message)
	}
}

func TestTooLargeWhileStreaming(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789"), 300_000) // 3 MB, compresses to little
	cases := map[string]struct {
		archive   []byte
		maxFiles  int
		chunked   bool
		wantBytes bool
	}{
		"an archive expanding past the cap":   {archive: tarball(t, true, entries(map[string][]byte{"1/saved_model.pb": big}))},
		"a download past the cap, no length":  {archive: big, chunked: true},
		"a download past the cap, its length": {archive: big},
		"too many files": {archive: tarball(t, true, entries(map[string][]byte{
			"1/a": nil, "1/b": nil, "1/c": nil, "1/d": nil, "1/saved_model.pb": nil,
		})), maxFiles: 4},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			srv := serveFile(t, c.archive)
			if c.chunked {
				srv.fault = func(_ int32, w http.ResponseWriter, _ *http.Request) bool {
					for i := 0; i < len(c.archive); i += 64 << 10 {
						_, _ = w.Write(c.archive[i:min(i+64<<10, len(c.archive))])
						w.(http.Flusher).Flush()
					}
					return true
				}
			}
			name := "/m.tar.gz"
			if !bytes.HasPrefix(c.archive, []byte{0x1f, 0x8b}) {
				name = "/m.bin"
			}
			o, _ := testOptions(t, srv.URL+name, "")
			o.MaxBytes = 1 << 20
			o.MaxFiles = c.maxFiles
			_, err := Run(context.Background(), o)
			wantFailure(t, err, servingv1alpha1.ReasonTooLarge, ExitPermanent)
			assertNothingPublished(t, o.Dest)
		})
	}
}
