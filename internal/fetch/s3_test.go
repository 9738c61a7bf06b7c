package fetch

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

func TestFetchingFromS3PublishesEveryVersion(t *testing.T) {
	s3 := newFakeS3(t)
	files := model(1, 2)
	s3.put(t, "resnet", files)
	s3.put(t, "resnet2", model(7)) // shares the prefix's first letters: not fetched
	o, _ := testOptions(t, "s3://models/resnet", s3.creds(t, testAccessKey, testSecretKey))

	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	assertTree(t, o.Dest, files)
	if !reflect.DeepEqual(sum.Versions, []int64{1, 2}) || sum.Files != int64(len(files)) {
		t.Errorf("summary %+v; want versions [1 2] and %d files", sum, len(files))
	}
	var total int64
	for _, b := range files {
		total += int64(len(b))
	}
	if sum.Bytes != total {
		t.Errorf("summary bytes %d; want %d", sum.Bytes, total)
	}
	if _, err := os.Stat(filepath.Join(o.Dest, ManifestName)); err != nil {
		t.Errorf("no manifest: %v", err)
	}

	// The same model fetched from elsewhere has the same digest.
	local := t.TempDir()
	writeTree(t, local, files)
	o2, _ := testOptions(t, local, "")
	sum2, err := Run(context.Background(), o2)
	if err != nil {
		t.Fatal(err)
	}
	if sum2.Received != 0 || sum.Received < sum.Bytes {
		t.Errorf("received %d bytes from a directory, %d from S3; want none, and at least the model's %d", sum2.Received, sum.Received, sum.Bytes)
	}
	sum2.Received, sum.Received = 0, 0
	if !reflect.DeepEqual(sum2, sum) {
		t.Errorf("the same model from a directory: %+v; from S3: %+v", sum2, sum)
	}
}

func TestS3WithoutKeysIsAnonymous(t *testing.T) {
	s3 := newFakeS3(t)
	s3.allowAnonymous = true
	s3.put(t, "public/m", model(1))
	o, _ := testOptions(t, "s3://models/public/m", s3.creds(t, "", ""))
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if s3.anonymous == 0 || s3.anonymous != len(s3.requests) {
		t.Errorf("%d of %d requests anonymous; want all", s3.anonymous, len(s3.requests))
	}
}

func TestMissingS3ModelIsNotFound(t *testing.T) {
	s3 := newFakeS3(t)
	s3.put(t, "resnet", model(1))
	for _, uri := range []string{"s3://models/nothing-here", "s3://no-such-bucket/resnet"} {
		t.Run(uri, func(t *testing.T) {
			o, _ := testOptions(t, uri, s3.creds(t, testAccessKey, testSecretKey))
			_, err := Run(context.Background(), o)
			fe := wantFailure(t, err, servingv1alpha1.ReasonNotFound, ExitPermanent)
			if !strings.Contains(fe.Message, strings.TrimPrefix(uri, "s3://")) {
				t.Errorf("message %q does not name the URI", fe.Message)
			}
			assertNothingPublished(t, o.Dest)
		})
	}
}

func TestWrongS3CredentialsAreAccessDeniedAndNeverShown(t *testing.T) {
	s3 := newFakeS3(t)
	s3.put(t, "resnet", model(1))
	for name, keys := range map[string][2]string{
		"unknown key":  {"AKIAUNKNOWN", testSecretKey},
		"wrong secret": {testAccessKey, "Wrong-Secret-Value-That-Must-Not-Leak"},
	} {
		t.Run(name, func(t *testing.T) {
			o, logs := testOptions(t, "s3://models/resnet", s3.creds(t, keys[0], keys[1]))
			before := s3.count("LIST", "/")
			_, err := Run(context.Background(), o)
			wantFailure(t, err, servingv1alpha1.ReasonAccessDenied, ExitPermanent)
			if n := s3.count("LIST", "/") - before; n != 1 {
				t.Errorf("%d listings; a refused credential must not be retried", n)
			}
			msg := TerminationMessage(Summary{}, err)
			for _, secret := range []string{keys[1], testSecretKey} {
				if strings.Contains(msg, secret) || strings.Contains(logs.String(), secret) || strings.Contains(err.Error(), secret) {
					t.Errorf("a secret key shows in the message %q or the logs", msg)
				}
			}
			assertNothingPublished(t, o.Dest)
		})
	}
}

func TestTransientS3ErrorsAreRetried(t *testing.T) {
	s3 := newFakeS3(t)
	files := model(1)
	s3.put(t, "m", files)
	// The first listing fails, and the first request for three files.
	failing := map[string][]int{
		"/models":                               {http.StatusServiceUnavailable},
		"/models/m/1/saved_model.pb":            {http.StatusInternalServerError},
		"/models/m/1/variables/variables.index": {http.StatusTooManyRequests},
		"/models/m/1/assets/vocab.txt":          {http.StatusBadGateway},
	}
	var mu sync.Mutex
	s3.setFault(func(r *http.Request) int {
		mu.Lock()
		defer mu.Unlock()
		if codes := failing[r.URL.Path]; len(codes) > 0 {
			failing[r.URL.Path] = codes[1:]
			return codes[0]
		}
		return 0
	})
	o, logs := testOptions(t, "s3://models/m", s3.creds(t, testAccessKey, testSecretKey))
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	assertTree(t, o.Dest, files)
	if n := strings.Count(logs.String(), `"msg":"retrying"`); n != 4 {
		t.Errorf("%d retries logged; want 4", n)
	}
}

func TestRetriesGiveUpAsTransient(t *testing.T) {
	s3 := newFakeS3(t)
	s3.put(t, "m", model(1))
	s3.setFault(func(r *http.Request) int {
		if isObjectRequest(r) && strings.HasSuffix(r.URL.Path, "saved_model.pb") {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	o, _ := testOptions(t, "s3://models/m", s3.creds(t, testAccessKey, testSecretKey))
	_, err := Run(context.Background(), o)
	wantFailure(t, err, servingv1alpha1.ReasonFetchFailed, ExitTransient)
	if n := s3.count("GET", "/models/m/1/saved_model.pb"); n != o.Retry.Attempts {
		t.Errorf("%d attempts; want %d", n, o.Retry.Attempts)
	}
	assertNotPublished(t, o.Dest)
}

func TestAForbiddenFileFailsAtOnceAndPublishesNothing(t *testing.T) {
	s3 := newFakeS3(t)
	s3.put(t, "m", model(1, 2))
	s3.setFault(func(r *http.Request) int {
		if strings.HasSuffix(r.URL.Path, "2/variables/variables.index") {
			return http.StatusForbidden
		}
		return 0
	})
	o, _ := testOptions(t, "s3://models/m", s3.creds(t, testAccessKey, testSecretKey))
	_, err := Run(context.Background(), o)
	wantFailure(t, err, servingv1alpha1.ReasonAccessDenied, ExitPermanent)
	if n := s3.count("GET", "/models/m/2/variables/variables.index"); n != 1 {
		t.Errorf("%d requests for the forbidden file; want 1", n)
	}
	assertNothingPublished(t, o.Dest)
}

func TestAFailedFetchLeavesThePreviousModelInPlace(t *testing.T) {
	s3 := newFakeS3(t)
	s3.put(t, "m", model(3))
	s3.setFault(func(r *http.Request) int {
		if strings.HasSuffix(r.URL.Path, "variables.index") {
			return http.StatusNotFound
		}
		return 0
	})
	o, _ := testOptions(t, "s3://models/m", s3.creds(t, testAccessKey, testSecretKey))
	old := model(1)
	writeTree(t, o.Dest, old)
	_, err := Run(context.Background(), o)
	wantFailure(t, err, servingv1alpha1.ReasonNotFound, ExitPermanent)
	assertTree(t, o.Dest, old)
	entries, _ := os.ReadDir(filepath.Dir(o.Dest))
	if len(entries) != 1 {
		t.Errorf("beside the destination: %v; want nothing", entries)
	}
}

func TestThePublishedDirectoryIsNeverPartial(t *testing.T) {
	s3 := newFakeS3(t)
	s3.latency = 5 * time.Millisecond
	files := model(1, 2, 3)
	s3.put(t, "m", files)
	o, _ := testOptions(t, "s3://models/m", s3.creds(t, testAccessKey, testSecretKey))
	o.Concurrency = 2
	// A model of another URI is there first: it is replaced whole.
	writeTree(t, o.Dest, model(9))

	done := make(chan struct{})
	seen := make(chan string, 1)
	go func() {
		defer close(seen)
		for {
			select {
			case <-done:
				return
			default:
			}
			// Read the tree through one handle on whatever directory is
			// at the destination now, as a reader that opened it would.
			got := map[string]bool{}
			if root, err := os.OpenRoot(o.Dest); err == nil {
				_ = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
					if err == nil && !d.IsDir() {
						got[p] = true
					}
					return nil
				})
				_ = root.Close()
			}
			if len(got) == 0 {
				continue // between the two renames
			}
			fresh := false
			for p := range got {
				fresh = fresh || p == ManifestName || p[0] != '9'
			}
			if !fresh {
				continue // the old model
			}
			if len(got) != len(files)+1 || !got[ManifestName] {
				seen <- fmt.Sprintf("%d files: %v", len(got), keys(got))
				return
			}
		}
	}()
	_, err := Run(context.Background(), o)
	close(done)
	if partial, ok := <-seen; ok {
		t.Errorf("the destination held a partial model: %s", partial)
	}
	if err != nil {
		t.Fatal(err)
	}
	assertTree(t, o.Dest, files)
}

func TestRerunningACompleteFetchDownloadsNothing(t *testing.T) {
	s3 := newFakeS3(t)
	files := model(1, 2)
	s3.put(t, "m", files)
	o, logs := testOptions(t, "s3://models/m", s3.creds(t, testAccessKey, testSecretKey))
	first, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	requests := len(s3.requests)

	second, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(s3.requests) - requests; n != 0 {
		t.Errorf("the second run made %d requests; want none", n)
	}
	if second.Received != 0 {
		t.Errorf("the second run received %d bytes; want none", second.Received)
	}
	first.Received = 0
	if !reflect.DeepEqual(first, second) {
		t.Errorf("second summary %+v; first %+v", second, first)
	}
	if !strings.Contains(logs.String(), "nothing to download") {
		t.Error("the second run did not say it skipped the download")
	}

	// A damaged file is noticed (same size, other content): fetched again.
	p := filepath.Join(o.Dest, "2", "saved_model.pb")
	if err := os.WriteFile(p, []byte(strings.Repeat("x", len(files["2/saved_model.pb"]))), 0o644); err != nil {
		t.Fatal(err)
	}
	third, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if s3.count("GET", "/models/m/2/saved_model.pb") != 2 {
		t.Error("the damaged model was not fetched again")
	}
	assertTree(t, o.Dest, files)
	third.Received = 0
	if !reflect.DeepEqual(first, third) {
		t.Errorf("after repair %+v; first %+v", third, first)
	}
}

func TestAThousandFileModel(t *testing.T) {
	s3 := newFakeS3(t)
	files := model(1)
	for i := range 1000 {
		files[fmt.Sprintf("1/assets/shard-%04d.txt", i)] = []byte(fmt.Sprintf("shard %d", i))
	}
	s3.put(t, "big", files)
	o, _ := testOptions(t, "s3://models/big", s3.creds(t, testAccessKey, testSecretKey))
	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Files != int64(len(files)) {
		t.Errorf("%d files; want %d", sum.Files, len(files))
	}
	assertTree(t, o.Dest, files)
}

func TestAModelOverTheSizeCapIsRefusedBeforeDownloading(t *testing.T) {
	s3 := newFakeS3(t)
	s3.put(t, "m", model(1, 2))
	o, _ := testOptions(t, "s3://models/m", s3.creds(t, testAccessKey, testSecretKey))
	o.MaxBytes = 4000
	_, err := Run(context.Background(), o)
	fe := wantFailure(t, err, servingv1alpha1.ReasonTooLarge, ExitPermanent)
	if !strings.Contains(fe.Message, "3.9 KiB") {
		t.Errorf("message %q does not give the limit", fe.Message)
	}
	if n := s3.count("GET", "/models/m/"); n != 0 {
		t.Errorf("%d objects downloaded; want none", n)
	}
	assertNothingPublished(t, o.Dest)
}

func TestAnUnversionedSavedModelIsServedAsVersion1(t *testing.T) {
	s3 := newFakeS3(t)
	s3.put(t, "flat", map[string][]byte{
		"saved_model.pb":                  []byte("graph"),
		"variables/variables.index":       []byte("index"),
		"variables/variables.data-0-of-1": []byte("data"),
		"fingerprint.pb":                  []byte("fp"),
	})
	o, logs := testOptions(t, "s3://models/flat", s3.creds(t, testAccessKey, testSecretKey))
	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	assertTree(t, o.Dest, map[string][]byte{
		"1/saved_model.pb":                  []byte("graph"),
		"1/variables/variables.index":       []byte("index"),
		"1/variables/variables.data-0-of-1": []byte("data"),
		"1/fingerprint.pb":                  []byte("fp"),
	})
	if !reflect.DeepEqual(sum.Versions, []int64{1}) {
		t.Errorf("versions %v; want [1]", sum.Versions)
	}
	m, err := readManifest(o.Dest)
	if err != nil || m.Files[0].Path != "1/fingerprint.pb" {
		t.Errorf("manifest paths not moved with the files: %+v, %v", m.Files, err)
	}
	if !strings.Contains(logs.String(), "version 1") {
		t.Error("the move to version 1 is not logged")
	}
	// A re-run recognizes the moved files.
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "nothing to download") {
		t.Error("the re-run downloaded again")
	}
}

func TestProgressIsLogged(t *testing.T) {
	s3 := newFakeS3(t)
	s3.latency = 30 * time.Millisecond
	s3.put(t, "m", model(1, 2))
	o, logs := testOptions(t, "s3://models/m", s3.creds(t, testAccessKey, testSecretKey))
	o.Concurrency = 1
	o.ProgressInterval = 20 * time.Millisecond
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	for _, want := range []string{`"msg":"progress"`, `"totalFiles":8`, `"mbPerSecond"`, `"msg":"download complete"`} {
		if !strings.Contains(out, want) {
			t.Errorf("logs lack %s:\n%s", want, out)
		}
	}
}

func TestTheTimeoutEndsTheFetchAsTransient(t *testing.T) {
	s3 := newFakeS3(t)
	s3.latency = 300 * time.Millisecond
	s3.put(t, "m", model(1))
	o, _ := testOptions(t, "s3://models/m", s3.creds(t, testAccessKey, testSecretKey))
	o.Timeout = 100 * time.Millisecond
	_, err := Run(context.Background(), o)
	fe := wantFailure(t, err, servingv1alpha1.ReasonTimeout, ExitTransient)
	if !strings.Contains(fe.Message, "--timeout") {
		t.Errorf("message %q does not name the flag", fe.Message)
	}
	assertNothingPublished(t, o.Dest)
}

// TF Serving's own test models name their version directories 00000123:
// the files keep that name, and everything reported gives the number.
func TestZeroPaddedVersionDirectoriesAreReportedByNumber(t *testing.T) {
	s3 := newFakeS3(t)
	files := map[string][]byte{}
	for name, b := range model(123, 124) {
		files["00000"+name] = b
	}
	s3.put(t, "half_plus_two", files)
	o, logs := testOptions(t, "s3://models/half_plus_two", s3.creds(t, testAccessKey, testSecretKey))
	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	assertTree(t, o.Dest, files)
	if !reflect.DeepEqual(sum.Versions, []int64{123, 124}) {
		t.Errorf("versions %v; want [123 124]", sum.Versions)
	}
	if msg := TerminationMessage(sum, nil); !strings.HasPrefix(msg, `{"versions":[123,124],`) {
		t.Errorf("termination message %s", msg)
	}
	m, err := readManifest(o.Dest)
	if err != nil || !reflect.DeepEqual(m.Versions, []int64{123, 124}) || !strings.HasPrefix(m.Files[0].Path, "00000123/") {
		t.Errorf("manifest versions %v, first file %+v (%v); want [123 124] and the files' own paths", m.Versions, m.Files[0], err)
	}
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "nothing to download") {
		t.Error("the re-run did not recognize the padded directories it published")
	}
}

func TestTwoDirectoriesOfOneVersionAreRefused(t *testing.T) {
	s3 := newFakeS3(t)
	files := model(123)
	for name, b := range model(123) {
		files["00000"+name] = b
	}
	s3.put(t, "m", files)
	o, _ := testOptions(t, "s3://models/m", s3.creds(t, testAccessKey, testSecretKey))
	_, err := Run(context.Background(), o)
	fe := wantFailure(t, err, servingv1alpha1.ReasonInvalidLayout, ExitPermanent)
	for _, want := range []string{"00000123/", "123/", "only one"} {
		if !strings.Contains(fe.Message, want) {
			t.Errorf("message %q lacks %q", fe.Message, want)
		}
	}
	assertNothingPublished(t, o.Dest)
}

// The S3 console's "Create folder" on the prefix leaves a zero-byte object
// whose key is the prefix and a slash.
func TestAFolderObjectAtThePrefixIsIgnored(t *testing.T) {
	s3 := newFakeS3(t)
	files := model(1)
	s3.put(t, "m", files)
	s3.put(t, "", map[string][]byte{"m/": nil, "m/1/": nil, "m/1/variables/": nil})
	o, _ := testOptions(t, "s3://models/m", s3.creds(t, testAccessKey, testSecretKey))
	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	assertTree(t, o.Dest, files)
	if !reflect.DeepEqual(sum.Versions, []int64{1}) {
		t.Errorf("versions %v; want [1]", sum.Versions)
	}

	// A folder with nothing in it is still no model.
	s3.put(t, "", map[string][]byte{"empty/": nil})
	o, _ = testOptions(t, "s3://models/empty", s3.creds(t, testAccessKey, testSecretKey))
	_, err = Run(context.Background(), o)
	wantFailure(t, err, servingv1alpha1.ReasonNotFound, ExitPermanent)
}
