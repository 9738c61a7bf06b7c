package s3server_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zeebo/blake3"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/fetch"
	"github.com/modelserver-dev/modelserver-operator/test/s3server"
)

const (
	bucket      = "models"
	testdataDir = "../testdata/tf-serving"
	halfPlusTwo = "saved_model_half_plus_two_cpu"
	twoVersions = "saved_model_half_plus_two_2_versions"
)

// layouts are the ways a model's version directories are named in the
// store: as TF Serving publishes its test models (00000123, which TF
// Serving serves as version 123), and with plain numbers (123). The second
// keeps the rest of the fetch covered whatever the fetcher makes of the
// first.
var layouts = []struct {
	name     string
	renumber bool
}{
	{"as published", false},
	{"plain version names", true},
}

func TestFetchPublishesTheModel(t *testing.T) {
	srv := startStore(t)
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			prefix := "half_plus_two-" + slug(l.name)
			model := stageModel(t, halfPlusTwo, l.renumber)
			upload(t, srv, prefix, model)

			dest, sum, err := runFetch(t, srv, "s3://"+bucket+"/"+prefix, srv.Creds)
			if err != nil {
				t.Fatalf("fetch failed: %v (exit code %d)", err, fetch.ExitCode(err))
			}
			assertPublished(t, dest, model)
			assertSummary(t, sum, model, []int64{123})

			// The termination message is the summary the operator reads.
			var reported fetch.Summary
			if err := json.Unmarshal([]byte(fetch.TerminationMessage(sum, nil)), &reported); err != nil {
				t.Fatalf("termination message is not JSON: %v", err)
			}
			if !reflect.DeepEqual(reported, sum) {
				t.Errorf("termination message %+v; the fetch returned %+v", reported, sum)
			}
		})
	}
}

func TestFetchReportsEveryVersion(t *testing.T) {
	srv := startStore(t)
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			prefix := "half_plus_two_2_versions-" + slug(l.name)
			model := stageModel(t, twoVersions, l.renumber)
			upload(t, srv, prefix, model)

			dest, sum, err := runFetch(t, srv, "s3://"+bucket+"/"+prefix, srv.Creds)
			if err != nil {
				t.Fatalf("fetch failed: %v", err)
			}
			assertPublished(t, dest, model)
			assertSummary(t, sum, model, []int64{123, 124})
		})
	}
}

func TestFetchExtractsATarGzArchive(t *testing.T) {
	srv := startStore(t)
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			model := stageModel(t, halfPlusTwo, l.renumber)
			// Wrapped in a directory, as `tar czf half_plus_two.tar.gz
			// half_plus_two/` makes it: the fetcher unwraps it.
			key := "archives/half_plus_two-" + slug(l.name) + ".tar.gz"
			if err := s3server.PutObject(context.Background(), srv.Client, bucket, key, tarGz(t, model, "half_plus_two")); err != nil {
				t.Fatal(err)
			}

			dest, sum, err := runFetch(t, srv, "s3://"+bucket+"/"+key, srv.Creds)
			if err != nil {
				t.Fatalf("fetch failed: %v", err)
			}
			assertPublished(t, dest, model)
			// The digest is the model's, not the archive's: the same as the
			// tree's.
			assertSummary(t, sum, model, []int64{123})
		})
	}
}

// Folder objects (zero-byte keys ending in '/') are what the S3 console's
// "Create folder" and several sync tools leave in a bucket; they hold no
// model file and must not change the fetch.
func TestFolderObjectsAreIgnored(t *testing.T) {
	srv := startStore(t)
	for name, folders := range map[string][]string{
		"below the prefix": {"123/", "123/variables/", "123/assets/"},
		"the prefix":       {""},
	} {
		t.Run(name, func(t *testing.T) {
			prefix := "folders-" + slug(name)
			model := stageModel(t, halfPlusTwo, true)
			upload(t, srv, prefix, model)
			for _, f := range folders {
				if err := s3server.PutObject(context.Background(), srv.Client, bucket, prefix+"/"+f, nil); err != nil {
					t.Fatal(err)
				}
			}
			dest, sum, err := runFetch(t, srv, "s3://"+bucket+"/"+prefix, srv.Creds)
			if err != nil {
				t.Fatalf("fetch failed: %v", err)
			}
			assertPublished(t, dest, model)
			assertSummary(t, sum, model, []int64{123})
		})
	}
}

func TestWrongSecretKeyIsAccessDenied(t *testing.T) {
	srv := startStore(t)
	upload(t, srv, "half_plus_two", stageModel(t, halfPlusTwo, true))
	wrong := s3server.Credentials{AccessKey: srv.Creds.AccessKey, SecretKey: s3server.NewCredentials().SecretKey}

	dest, _, err := runFetch(t, srv, "s3://"+bucket+"/half_plus_two", wrong)
	msg := wantPermanentFailure(t, err, servingv1alpha1.ReasonAccessDenied)
	for _, secret := range []string{wrong.SecretKey, srv.Creds.SecretKey} {
		if strings.Contains(msg, secret) || strings.Contains(err.Error(), secret) {
			t.Errorf("a secret key shows in the failure: %q", msg)
		}
	}
	assertNothingPublished(t, dest)
}

func TestMissingPrefixIsNotFound(t *testing.T) {
	srv := startStore(t)
	upload(t, srv, "half_plus_two", stageModel(t, halfPlusTwo, true))
	for _, uri := range []string{
		"s3://" + bucket + "/half_plus_three",   // nothing there
		"s3://" + bucket + "/half_plus_tw",      // a prefix of a model's key, but not a directory of it
		"s3://no-such-bucket/half_plus_two",     // no bucket
		"s3://" + bucket + "/half_plus_two.tgz", // no archive
	} {
		t.Run(uri, func(t *testing.T) {
			dest, _, err := runFetch(t, srv, uri, srv.Creds)
			msg := wantPermanentFailure(t, err, servingv1alpha1.ReasonNotFound)
			if !strings.Contains(msg, strings.TrimPrefix(uri, "s3://")) {
				t.Errorf("the failure %q does not name what is missing", msg)
			}
			assertNothingPublished(t, dest)
		})
	}
}

func TestCorruptArchiveIsInvalid(t *testing.T) {
	srv := startStore(t)
	good := tarGz(t, stageModel(t, halfPlusTwo, true), "half_plus_two")
	for name, body := range map[string][]byte{
		// A download that stopped halfway, stored as if it were whole.
		"truncated": good[:len(good)/2],
		"not gzip":  []byte("this is not a gzip stream, whatever its name says\n"),
		// A valid gzip stream whose content is not a tar file.
		"gzip of text": gzipped(t, bytes.Repeat([]byte("not a tar header\n"), 64)),
	} {
		t.Run(name, func(t *testing.T) {
			key := "broken/" + slug(name) + ".tar.gz"
			if err := s3server.PutObject(context.Background(), srv.Client, bucket, key, body); err != nil {
				t.Fatal(err)
			}
			dest, _, err := runFetch(t, srv, "s3://"+bucket+"/"+key, srv.Creds)
			wantPermanentFailure(t, err, servingv1alpha1.ReasonInvalidLayout)
			assertNothingPublished(t, dest)
		})
	}
}

// startStore starts versitygw with an empty bucket.
func startStore(t *testing.T) *s3server.Server {
	t.Helper()
	srv := s3server.Start(t, s3server.Binary(t))
	if err := s3server.CreateBucket(context.Background(), srv.Client, bucket); err != nil {
		t.Fatal(err)
	}
	return srv
}

func upload(t *testing.T, srv *s3server.Server, prefix, dir string) {
	t.Helper()
	if err := s3server.UploadDir(context.Background(), srv.Client, bucket, prefix, dir); err != nil {
		t.Fatal(err)
	}
}

// stageModel copies a test model to a directory of its own; renumber names
// its version directories 123 rather than 00000123.
func stageModel(t *testing.T, name string, renumber bool) string {
	t.Helper()
	src := filepath.Join(testdataDir, name)
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if rel == "." {
			return nil
		}
		if renumber {
			top, rest, _ := strings.Cut(filepath.ToSlash(rel), "/")
			if v, err := strconv.ParseInt(top, 10, 64); err == nil {
				rel = filepath.Join(strconv.FormatInt(v, 10), filepath.FromSlash(rest))
			}
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// runFetch fetches uri with a credentials directory as the fetch Job mounts
// it from a Secret, into a destination of its own; the fetcher's logs are
// shown if the test fails.
func runFetch(t *testing.T, srv *s3server.Server, uri string, creds s3server.Credentials) (string, fetch.Summary, error) {
	t.Helper()
	credsDir := t.TempDir()
	for k, v := range map[string]string{
		fetch.KeyAWSAccessKeyID:     creds.AccessKey,
		fetch.KeyAWSSecretAccessKey: creds.SecretKey,
		fetch.KeyAWSEndpointURL:     srv.Endpoint,
		fetch.KeyAWSForcePathStyle:  "true",
		fetch.KeyAWSRegion:          s3server.Region,
	} {
		if err := os.WriteFile(filepath.Join(credsDir, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	logs := &syncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("fetch logs:\n%s", logs.String())
		}
	})
	dest := filepath.Join(t.TempDir(), "half_plus_two")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sum, err := fetch.Run(ctx, fetch.Options{
		URI:            uri,
		Dest:           dest,
		CredentialsDir: credsDir,
		// Short waits: a failure classified as worth a retry fails the
		// test by its Permanent flag, not by a slow backoff.
		Retry:  fetch.RetryPolicy{Attempts: 3, Budget: 10, BaseDelay: 20 * time.Millisecond, MaxDelay: 100 * time.Millisecond},
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	return dest, sum, err
}

// assertPublished checks that dest holds exactly the model's files, byte
// for byte, and the fetch's manifest, and that nothing of the fetch is left
// beside it.
func assertPublished(t *testing.T, dest, model string) {
	t.Helper()
	got := readTree(t, dest)
	if _, ok := got[fetch.ManifestName]; !ok {
		t.Errorf("no %s in %s", fetch.ManifestName, dest)
	}
	delete(got, fetch.ManifestName)
	want := readTree(t, model)
	if !reflect.DeepEqual(keys(got), keys(want)) {
		t.Fatalf("published files %v; want %v", keys(got), keys(want))
	}
	for p, b := range want {
		if !bytes.Equal(got[p], b) {
			t.Errorf("%s differs from the model's", p)
		}
	}
	if names := dirNames(t, filepath.Dir(dest)); !reflect.DeepEqual(names, []string{filepath.Base(dest)}) {
		t.Errorf("beside the model: %v; want only %s", names, filepath.Base(dest))
	}
}

// assertSummary checks the summary against the model on disk. The digest is
// computed as Summary documents it, so that a model's digest is the same
// whatever fetched it.
func assertSummary(t *testing.T, sum fetch.Summary, model string, versions []int64) {
	t.Helper()
	files := readTree(t, model)
	var size int64
	lines := make([]string, 0, len(files))
	for _, p := range keys(files) {
		b := files[p]
		size += int64(len(b))
		h := blake3.Sum256(b) // every file here is below the size recorded by its chunks
		lines = append(lines, fmt.Sprintf("%s\x00%d\x00blake3:%s\n", p, len(b), hex.EncodeToString(h[:])))
	}
	digest := sha256.Sum256([]byte(strings.Join(lines, "")))
	// Received counts the answers' framing too: no more than the files
	// (or their archive, compressed) and a few kilobytes for each.
	if sum.Received <= 0 || sum.Received > size+int64(len(files)+2)*4096 {
		t.Errorf("received %d bytes for %d of files", sum.Received, size)
	}
	sum.Received = 0
	want := fetch.Summary{Versions: versions, Files: int64(len(files)), Bytes: size, Digest: "sha256:" + hex.EncodeToString(digest[:])}
	if !reflect.DeepEqual(sum, want) {
		t.Errorf("summary %+v; want %+v", sum, want)
	}
}

// wantPermanentFailure checks that err is a fetch failure for reason that
// retrying cannot fix, and returns its termination message.
func wantPermanentFailure(t *testing.T, err error, reason string) string {
	t.Helper()
	if err == nil {
		t.Fatalf("the fetch succeeded; want %s", reason)
	}
	fe := fetch.AsError(err)
	if fe.Reason != reason {
		t.Errorf("reason %s (%v); want %s", fe.Reason, err, reason)
	}
	if !fe.Permanent || fetch.ExitCode(err) != fetch.ExitPermanent {
		t.Errorf("%v: permanent %v, exit code %d; want permanent, exit code %d", err, fe.Permanent, fetch.ExitCode(err), fetch.ExitPermanent)
	}
	msg := fetch.TerminationMessage(fetch.Summary{}, err)
	t.Logf("termination message: %s", msg)
	if !strings.HasPrefix(msg, reason+": ") {
		t.Errorf("termination message %q does not start with %s", msg, reason)
	}
	return msg
}

// assertNothingPublished checks that a failed fetch left nothing where TF
// Serving looks, nor a partial download beside it.
func assertNothingPublished(t *testing.T, dest string) {
	t.Helper()
	if _, err := os.Lstat(dest); err == nil {
		t.Errorf("%s exists after a failed fetch", dest)
	}
	if names := dirNames(t, filepath.Dir(dest)); len(names) > 0 {
		t.Errorf("a failed fetch left %v beside %s", names, filepath.Base(dest))
	}
}

// tarGz archives dir's files below top/, directories first as tar does.
func tarGz(t *testing.T, dir, top string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		name := filepath.ToSlash(filepath.Join(top, rel))
		if d.IsDir() {
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o755})
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(b))}); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = gz.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	if _, err := gz.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// readTree reads every file below dir, by its slash-separated path.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func keys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// slug makes a subtest's name usable in an object key.
func slug(s string) string { return strings.ReplaceAll(s, " ", "-") }

// syncBuffer is a log sink for the fetcher's parallel downloads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
