package fetch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Test doubles: an S3 store (gofakes3's in-memory backend) behind a
// handler that checks signatures and injects faults, and helpers to build
// models and run fetches.

const (
	testAccessKey = "AKIATESTFETCHER"
	testSecretKey = "s3cr3t-Value-That-Must-Never-Leak-7f9c"
	testBucket    = "models"
)

// fakeS3 is an in-process S3 store.
type fakeS3 struct {
	*httptest.Server
	backend *s3mem.Backend
	// keys are the accepted access keys and their secrets; anonymous
	// requests pass only when allowAnonymous is set.
	keys           map[string]string
	allowAnonymous bool
	// sessions are the session tokens temporary keys need (grant).
	sessions map[string]string
	// fault, when set, may answer a request instead of the store: it
	// returns the status to answer with, or 0 to let the store answer.
	fault atomic.Pointer[func(r *http.Request) int]
	// unversionedListing drops the ETags from listings, as some
	// S3-compatible stores list objects without them.
	unversionedListing bool
	// latency is added before the store answers a GET of an object,
	// as a real store's time to first byte.
	latency time.Duration
	// streamRate, when set, caps each GET of an object at that many bytes
	// a second, as a store caps a connection.
	streamRate atomic.Int64

	mu        sync.Mutex
	requests  []string // "GET /bucket/key", "LIST /bucket"
	anonymous int
}

func newFakeS3(t testing.TB) *fakeS3 {
	t.Helper()
	f := &fakeS3{backend: s3mem.New(), keys: map[string]string{testAccessKey: testSecretKey}}
	faker := gofakes3.New(f.backend, gofakes3.WithLogger(gofakes3.DiscardLog()))
	inner := faker.Server()
	f.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.record(r)
		// gofakes3 checks no signature: this wrapper does, so that a
		// wrong key or secret is refused as S3 refuses it.
		if code, msg, ok := f.authorize(r); !ok {
			writeS3Error(w, http.StatusForbidden, code, msg)
			return
		}
		if fault := f.fault.Load(); fault != nil {
			if status := (*fault)(r); status != 0 {
				writeS3Error(w, status, http.StatusText(status), "injected fault")
				return
			}
		}
		if f.latency > 0 && r.Method == http.MethodGet && isObjectRequest(r) {
			time.Sleep(f.latency)
		}
		if rate := f.streamRate.Load(); rate > 0 && r.Method == http.MethodGet && isObjectRequest(r) {
			w = &paced{ResponseWriter: w, rate: rate, start: time.Now()}
		}
		if f.unversionedListing && r.Method == http.MethodGet && !isObjectRequest(r) {
			listing := httptest.NewRecorder()
			inner.ServeHTTP(listing, r)
			maps.Copy(w.Header(), listing.Header())
			w.Header().Del("Content-Length")
			w.WriteHeader(listing.Code)
			_, _ = w.Write(etagElement.ReplaceAll(listing.Body.Bytes(), nil))
			return
		}
		inner.ServeHTTP(w, r)
	}))
	// gofakes3 writes some error statuses twice; net/http's complaint
	// about it is noise.
	f.Config.ErrorLog = log.New(io.Discard, "", 0)
	f.Start()
	t.Cleanup(f.Close)
	if err := f.backend.CreateBucket(testBucket); err != nil {
		t.Fatal(err)
	}
	return f
}

func isObjectRequest(r *http.Request) bool {
	return strings.Count(strings.Trim(r.URL.Path, "/"), "/") >= 1
}

func (f *fakeS3) record(r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	kind := r.Method
	if r.Method == http.MethodGet && !isObjectRequest(r) {
		kind = "LIST"
	}
	f.requests = append(f.requests, kind+" "+r.URL.Path)
	if r.Header.Get("Authorization") == "" {
		f.anonymous++
	}
}

// count is the number of requests of kind ("GET", "LIST", "HEAD") whose
// path has the given prefix.
func (f *fakeS3) count(kind, pathPrefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.requests {
		if strings.HasPrefix(r, kind+" "+pathPrefix) {
			n++
		}
	}
	return n
}

func (f *fakeS3) setFault(fn func(r *http.Request) int) { f.fault.Store(&fn) }

var etagElement = regexp.MustCompile(`<ETag>[^<]*</ETag>`)

var credentialPattern = regexp.MustCompile(`Credential=([^/]+)/([0-9]{8})/([^/]+)/s3/aws4_request, SignedHeaders=([^,]+), Signature=([0-9a-f]+)`)

// authorize checks a request's SigV4 signature against the known keys.
func (f *fakeS3) authorize(r *http.Request) (code, msg string, ok bool) {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		if f.allowAnonymous {
			return "", "", true
		}
		return "AccessDenied", "Access Denied", false
	}
	m := credentialPattern.FindStringSubmatch(auth)
	if m == nil {
		return "AccessDenied", "malformed Authorization header", false
	}
	f.mu.Lock()
	secret, known := f.keys[m[1]]
	session := f.sessions[m[1]]
	f.mu.Unlock()
	if !known {
		return "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.", false
	}
	if session != r.Header.Get("X-Amz-Security-Token") {
		return "InvalidToken", "The provided token is malformed or otherwise invalid.", false
	}
	// Sign the request again with the secret we know, over the headers
	// the client signed, and compare.
	signed := r.Clone(context.Background())
	signed.Header = http.Header{}
	for _, h := range strings.Split(m[4], ";") {
		if h != "host" {
			signed.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return "AccessDenied", "no X-Amz-Date", false
	}
	creds := aws.Credentials{AccessKeyID: m[1], SecretAccessKey: secret, SessionToken: r.Header.Get("X-Amz-Security-Token")}
	err = v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }).
		SignHTTP(context.Background(), creds, signed, r.Header.Get("X-Amz-Content-Sha256"), "s3", m[3], at)
	if err != nil {
		return "AccessDenied", err.Error(), false
	}
	if !strings.HasSuffix(signed.Header.Get("Authorization"), "Signature="+m[5]) {
		return "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided.", false
	}
	return "", "", true
}

func writeS3Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message><RequestId>1</RequestId></Error>`, code, msg)
}

// grant accepts temporary keys, signed with their session token, as STS
// gives them; revoke takes every key back.
func (f *fakeS3) grant(accessKey, secretKey, session string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sessions == nil {
		f.sessions = map[string]string{}
	}
	f.keys[accessKey], f.sessions[accessKey] = secretKey, session
}

func (f *fakeS3) revoke() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys, f.sessions = map[string]string{}, nil
}

// put stores a model's files under prefix.
func (f *fakeS3) put(t testing.TB, prefix string, files map[string][]byte) {
	t.Helper()
	for name, data := range files {
		key := strings.TrimPrefix(prefix+"/"+name, "/")
		if _, err := f.backend.PutObject(testBucket, key, map[string]string{}, bytes.NewReader(data), int64(len(data)), nil); err != nil {
			t.Fatal(err)
		}
	}
}

// creds writes a credentials Secret for the fake store.
func (f *fakeS3) creds(t testing.TB, accessKey, secretKey string) string {
	t.Helper()
	values := map[string]string{
		KeyAWSEndpointURL:    f.URL,
		KeyAWSForcePathStyle: "true",
	}
	if accessKey != "" {
		values[KeyAWSAccessKeyID] = accessKey
		values[KeyAWSSecretAccessKey] = secretKey + "\n" // as kubectl --from-file leaves it
	}
	return secretDir(t, values)
}

// secretDir writes a directory laid out as a mounted Secret: the keys are
// symbolic links into ..data.
func secretDir(t testing.TB, values map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	data := filepath.Join(dir, "..2026_01_01_00_00_00.000000001")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Base(data), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for k, v := range values {
		if err := os.WriteFile(filepath.Join(data, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..data", k), filepath.Join(dir, k)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// model is a small SavedModel tree with the given versions.
func model(versions ...int) map[string][]byte {
	files := map[string][]byte{}
	for _, v := range versions {
		p := fmt.Sprintf("%d/", v)
		files[p+"saved_model.pb"] = []byte(fmt.Sprintf("graph of version %d", v))
		files[p+"variables/variables.index"] = []byte(fmt.Sprintf("index %d", v))
		files[p+"variables/variables.data-00000-of-00001"] = bytes.Repeat([]byte{byte(v)}, 3000+v)
		files[p+"assets/vocab.txt"] = []byte("a\nb\nc\n")
	}
	return files
}

func writeTree(t testing.TB, dir string, files map[string][]byte) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// readTree reads every file below dir, the manifest left out.
func readTree(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == ManifestName {
			return nil
		}
		b, err := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func assertTree(t testing.TB, dir string, want map[string][]byte) {
	t.Helper()
	got := readTree(t, dir)
	if len(got) != len(want) {
		t.Errorf("%s holds %d files, want %d: %v", dir, len(got), len(want), keys(got))
	}
	for name, data := range want {
		if g, ok := got[name]; !ok {
			t.Errorf("%s: %s missing", dir, name)
		} else if !bytes.Equal(g, data) {
			t.Errorf("%s: %s differs", dir, name)
		}
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// logBuffer collects a fetch's logs.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// testOptions are options for a fetch into a fresh destination, with fast
// retries and logs collected into the returned buffer.
func testOptions(t testing.TB, uri, credsDir string) (Options, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	return Options{
		URI:            uri,
		Dest:           filepath.Join(t.TempDir(), "models", "gen-1"),
		CredentialsDir: credsDir,
		Retry:          RetryPolicy{Attempts: 4, Budget: 50, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond},
		Logger:         slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Timeout:        time.Minute,
	}, logs
}

// wantFailure checks err's reason and exit code.
func wantFailure(t testing.TB, err error, reason string, exit int) Error {
	t.Helper()
	if err == nil {
		t.Fatalf("the fetch succeeded; want %s", reason)
	}
	fe := AsError(err)
	t.Logf("termination message: %s", TerminationMessage(Summary{}, err))
	if fe.Reason != reason {
		t.Fatalf("reason %s (%v); want %s", fe.Reason, err, reason)
	}
	if got := ExitCode(err); got != exit {
		t.Fatalf("exit code %d for %v; want %d", got, err, exit)
	}
	return *fe
}

// assertNothingPublished checks that dest does not exist and that no
// temporary sibling of it is left.
func assertNothingPublished(t testing.TB, dest string) {
	t.Helper()
	if _, err := os.Lstat(dest); !os.IsNotExist(err) {
		t.Errorf("%s exists after a failed fetch", dest)
	}
	entries, _ := os.ReadDir(filepath.Dir(dest))
	for _, e := range entries {
		t.Errorf("%s left beside the destination", e.Name())
	}
}
