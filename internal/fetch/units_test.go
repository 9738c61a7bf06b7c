package fetch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

func TestClassify(t *testing.T) {
	apiErr := func(code string) error {
		return &smithy.OperationError{ServiceID: "S3", OperationName: "GetObject", Err: &smithy.GenericAPIError{Code: code, Message: "m"}}
	}
	respErr := func(status int) error {
		return &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}}, Err: errors.New("x")}}
	}
	cases := []struct {
		err       error
		reason    string
		permanent bool
	}{
		{apiErr("NoSuchKey"), servingv1alpha1.ReasonNotFound, true},
		{apiErr("NoSuchBucket"), servingv1alpha1.ReasonNotFound, true},
		{apiErr("InvalidAccessKeyId"), servingv1alpha1.ReasonAccessDenied, true},
		{apiErr("SignatureDoesNotMatch"), servingv1alpha1.ReasonAccessDenied, true},
		{apiErr("ExpiredToken"), servingv1alpha1.ReasonAccessDenied, true},
		{apiErr("SlowDown"), servingv1alpha1.ReasonFetchFailed, false},
		{apiErr("InternalError"), servingv1alpha1.ReasonFetchFailed, false},
		{apiErr("PermanentRedirect"), servingv1alpha1.ReasonFetchFailed, true},
		{apiErr("InvalidObjectState"), servingv1alpha1.ReasonFetchFailed, true},
		{respErr(404), servingv1alpha1.ReasonNotFound, true},
		{respErr(403), servingv1alpha1.ReasonAccessDenied, true},
		{respErr(503), servingv1alpha1.ReasonFetchFailed, false},
		{respErr(429), servingv1alpha1.ReasonFetchFailed, false},
		{respErr(400), servingv1alpha1.ReasonFetchFailed, true},
		{&statusError{code: 404, status: "404 Not Found"}, servingv1alpha1.ReasonNotFound, true},
		{&statusError{code: 403, status: "403 Forbidden"}, servingv1alpha1.ReasonAccessDenied, true},
		{&statusError{code: 401, status: "401 Unauthorized: Anonymous caller does not have storage.objects.list access"}, servingv1alpha1.ReasonAccessDenied, true},
		{&statusError{code: 500, status: "500 Internal Server Error"}, servingv1alpha1.ReasonFetchFailed, false},
		{&statusError{code: 429, status: "429 Too Many Requests"}, servingv1alpha1.ReasonFetchFailed, false},
		{&statusError{code: 408, status: "408"}, servingv1alpha1.ReasonFetchFailed, false},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), servingv1alpha1.ReasonFetchFailed, false},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, servingv1alpha1.ReasonFetchFailed, false},
		{io.ErrUnexpectedEOF, servingv1alpha1.ReasonFetchFailed, false},
		{fmt.Errorf("write: %w", syscall.ENOSPC), servingv1alpha1.ReasonTooLarge, true},
		{context.DeadlineExceeded, servingv1alpha1.ReasonTimeout, false},
		{&os.PathError{Op: "open", Path: "/x", Err: os.ErrNotExist}, servingv1alpha1.ReasonNotFound, true},
		{&os.PathError{Op: "open", Path: "/x", Err: os.ErrPermission}, servingv1alpha1.ReasonAccessDenied, true},
		{errors.New("something odd"), servingv1alpha1.ReasonFetchFailed, false},
	}
	for _, c := range cases {
		got := classify(c.err, "s3://b/k")
		if got.Reason != c.reason || got.Permanent != c.permanent {
			t.Errorf("classify(%v) = %s permanent=%v; want %s permanent=%v", c.err, got.Reason, got.Permanent, c.reason, c.permanent)
		}
		if !strings.HasPrefix(got.Message, "s3://b/k: ") {
			t.Errorf("classify(%v) message %q does not name the object", c.err, got.Message)
		}
	}
}

func TestVerifyLayout(t *testing.T) {
	sm := []byte("graph")
	cases := []struct {
		name     string
		files    map[string][]byte
		dirs     []string
		versions []int64
		message  string // for a failure
	}{
		{"two versions", map[string][]byte{"1/saved_model.pb": sm, "10/saved_model.pbtxt": sm}, []string{"1/variables", "10/variables"}, []int64{1, 10}, ""},
		{"the manifest", map[string][]byte{"3/saved_model.pb": sm, ManifestName: nil}, []string{"3/variables"}, []int64{3}, ""},
		{"empty", nil, nil, nil, "is empty"},
		{"a stray file", map[string][]byte{"1/saved_model.pb": sm, "README.md": nil}, []string{"1/variables"}, nil, `"README.md" at the top`},
		{"version 0", map[string][]byte{"0/saved_model.pb": sm}, []string{"0/variables"}, nil, `found "0/"`},
		// TF Serving parses 00000123 as version 123; its own test models
		// are named so.
		{"a leading zero", map[string][]byte{"00000123/saved_model.pb": sm, "2/saved_model.pb": sm}, []string{"00000123/variables", "2/variables"}, []int64{2, 123}, ""},
		{"the same version twice", map[string][]byte{"123/saved_model.pb": sm, "00000123/saved_model.pb": sm}, []string{"123/variables", "00000123/variables"}, nil,
			"the directories 00000123/ and 123/ are both version 123, and TF Serving would load only one of them"},
		{"a padded version without variables", map[string][]byte{"007/saved_model.pb": sm}, nil, nil, "version 7 (007/) has no variables/"},
		{"not only digits", map[string][]byte{"1/saved_model.pb": sm, "v2/saved_model.pb": sm, "+3/saved_model.pb": sm, " 4/saved_model.pb": sm, "5 /saved_model.pb": sm, "-6/saved_model.pb": sm, "0x7/saved_model.pb": sm},
			[]string{"1/variables"}, nil, `" 4/", "+3/", "-6/", "0x7/", "5 /", "v2/" at the top`},
		{"all zeros", map[string][]byte{"000/saved_model.pb": sm}, []string{"000/variables"}, nil, `found "000/"`},
		{"over int64", map[string][]byte{"9223372036854775808/saved_model.pb": sm}, []string{"9223372036854775808/variables"}, nil, `found "9223372036854775808/"`},
		{"a misnamed version", map[string][]byte{"v1/saved_model.pb": sm}, []string{"v1/variables"}, nil, "v1/ holds a SavedModel, but TF Serving takes only a directory named by a positive integer as a version: rename it"},
		{"no graph", map[string][]byte{"2/model.onnx": sm}, []string{"2/variables"}, nil, `version 2 has no saved_model.pb or saved_model.pbtxt (found "model.onnx", "variables/")`},
		{"no variables", map[string][]byte{"2/saved_model.pb": sm}, nil, nil, "version 2 has no variables/"},
		{"one level too high", map[string][]byte{"resnet/1/saved_model.pb": sm}, []string{"resnet/1/variables"}, nil,
			"there is a SavedModel at resnet/1/saved_model.pb: point the URI at s3://b/m/resnet, the directory holding its version directories"},
		{"too high and misnamed", map[string][]byte{"team/resnet/v1/saved_model.pb": sm}, []string{"team/resnet/v1/variables"}, nil,
			"point the URI at s3://b/m/team/resnet, the directory holding its version directories, and rename v1/ to a positive integer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, c.files)
			for _, d := range c.dirs {
				if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			got, err := verifyLayout(dir, "s3://b/m", false)
			if c.message == "" {
				if err != nil || fmt.Sprint(got) != fmt.Sprint(c.versions) {
					t.Fatalf("verifyLayout = %v, %v; want %v", got, err, c.versions)
				}
				return
			}
			fe := AsError(err)
			if err == nil || fe.Reason != servingv1alpha1.ReasonInvalidLayout || !fe.Permanent || !strings.Contains(fe.Message, c.message) {
				t.Fatalf("verifyLayout: %v; want a permanent InvalidLayout saying %q", err, c.message)
			}
		})
	}
}

func TestVersionNames(t *testing.T) {
	for name, want := range map[string]int64{
		"1": 1, "10": 10, "01": 1, "00000123": 123, "9223372036854775807": 1<<63 - 1, "000000000000000000000000042": 42,
		"": 0, "0": 0, "000": 0, "-1": 0, "+1": 0, " 1": 0, "1 ": 0, "1_000": 0, "1e3": 0, "0x1f": 0, "١": 0, "9223372036854775808": 0,
	} {
		got, ok := versionName(name)
		if ok != (want != 0) || got != want {
			t.Errorf("versionName(%q) = %d, %v; want %d, %v", name, got, ok, want, want != 0)
		}
	}
}

func TestTheHintForAMisplacedModelFitsWhereItIs(t *testing.T) {
	for _, c := range []struct {
		found   string
		archive bool
		want    string // "" for no hint
	}{
		{"", false, ""},
		{"saved_model.pb", false, ""},
		// The URI points at the right directory: its version directory is
		// misnamed, and no other URI would help.
		{"v1/saved_model.pb", false, "v1/ holds a SavedModel"},
		{"0/saved_model.pb", false, "rename it (to 1/, say)"},
		{"resnet/1/saved_model.pb", false, "point the URI at s3://b/m/resnet,"},
		{"resnet/1/saved_model.pb", true, "pack the content of resnet/ at the top of the archive"},
	} {
		got := misplacedModelHint(c.found, "s3://b/m/", c.archive)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("misplacedModelHint(%q, archive %v) = %q; want %q", c.found, c.archive, got, c.want)
		}
		if strings.Count(c.found, "/") == 1 && strings.Contains(got, "point the URI") {
			t.Errorf("misplacedModelHint(%q) = %q moves a URI that already points at the version directories", c.found, got)
		}
	}
}

func TestNormalizeRefusesATopSavedModelBesideVersions(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string][]byte{"saved_model.pb": nil, "1/saved_model.pb": nil})
	_, _, err := normalize(dir, false)
	if fe := AsError(err); err == nil || fe.Reason != servingv1alpha1.ReasonInvalidLayout {
		t.Fatalf("normalize: %v; want InvalidLayout", err)
	}
}

func TestRetrierBacksOffAndKeepsToItsBudget(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	r := newRetrier(RetryPolicy{Attempts: 5, Budget: 6, BaseDelay: time.Millisecond, MaxDelay: 4 * time.Millisecond}, log)
	for attempt, max := range map[int]time.Duration{1: time.Millisecond, 2: 2 * time.Millisecond, 3: 4 * time.Millisecond, 6: 4 * time.Millisecond} {
		for range 20 {
			if d := r.delay(attempt); d < max/2 || d > max {
				t.Fatalf("delay after attempt %d: %v; want between %v and %v", attempt, d, max/2, max)
			}
		}
	}
	calls := 0
	transient := func(context.Context) error { calls++; return transientf(servingv1alpha1.ReasonFetchFailed, "flaky") }
	if err := r.do(context.Background(), "a", transient); err == nil || calls != 5 {
		t.Errorf("%d calls, %v; want 5 attempts", calls, err)
	}
	calls = 0
	if err := r.do(context.Background(), "b", transient); err == nil || calls != 3 || !strings.Contains(err.Error(), "budget") {
		t.Errorf("%d calls, %v; want the budget's 2 retries left", calls, err)
	}
	calls = 0
	permanent := func(context.Context) error { calls++; return permanentf(servingv1alpha1.ReasonNotFound, "gone") }
	if err := r.do(context.Background(), "c", permanent); err == nil || calls != 1 {
		t.Errorf("%d calls for a permanent error; want 1", calls)
	}
}

func TestARetryAfterIsReadInSecondsOrAsADate(t *testing.T) {
	now := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              0,
		"7":                             7 * time.Second,
		" 120 ":                         2 * time.Minute,
		"0":                             0,
		"-3":                            0,
		"soon":                          0,
		"Mon, 07 Dec 2026 09:00:30 GMT": 30 * time.Second,
		"Mon, 07 Dec 2026 08:59:00 GMT": 0,
		"99999999999":                   24 * time.Hour,
	} {
		h := http.Header{}
		if v != "" {
			h.Set("Retry-After", v)
		}
		if got := retryAfter(h, now); got != want {
			t.Errorf("Retry-After %q: %v, want %v", v, got, want)
		}
	}
}

// The retrier waits as long as a store's Retry-After asks, up to
// maxRetryAfter, when that is longer than its own backoff.
func TestTheRetrierWaitsAsLongAsTheStoreAsks(t *testing.T) {
	var logs strings.Builder
	r := newRetrier(RetryPolicy{Attempts: 2, Budget: 2, BaseDelay: time.Millisecond, MaxDelay: 4 * time.Millisecond}, slog.New(slog.NewTextHandler(&logs, nil)))
	calls := 0
	throttled := func(context.Context) error {
		calls++
		if calls == 1 {
			return &statusError{code: http.StatusTooManyRequests, status: "429 Too Many Requests", retryAfter: 50 * time.Millisecond}
		}
		return nil
	}
	if err := r.do(context.Background(), "a", throttled); err != nil || calls != 2 {
		t.Fatalf("%d calls, %v; want a second that succeeds", calls, err)
	}
	if !strings.Contains(logs.String(), "in=50ms") {
		t.Errorf("the wait the store asked for is not the retry's:\n%s", logs.String())
	}
	asked := http.Header{"Retry-After": {"9"}}
	for name, err := range map[string]error{
		"http(s)://, Cloud Storage": fmt.Errorf("wrapped: %w", &statusError{retryAfter: 9 * time.Second}),
		"S3": &smithy.OperationError{ServiceID: "S3", OperationName: "GetObject", Err: &awshttp.ResponseError{
			ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: http.StatusServiceUnavailable, Header: asked}}, Err: errors.New("SlowDown")},
		}},
		"Azure": &Error{Reason: servingv1alpha1.ReasonFetchFailed, Err: &azcore.ResponseError{StatusCode: http.StatusServiceUnavailable, ErrorCode: "ServerBusy", RawResponse: &http.Response{Header: asked}}},
	} {
		if d := storeRetryAfter(err); d != 9*time.Second {
			t.Errorf("%s: Retry-After read as %v, want 9s", name, d)
		}
	}
	if d := storeRetryAfter(&awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{}}}); d != 0 {
		t.Errorf("an S3 error without its response: %v", d)
	}
}

func TestCredentialsAreReadAndRedacted(t *testing.T) {
	dir := secretDir(t, map[string]string{
		KeyAWSAccessKeyID:     "AKIAREDACTME\n",
		KeyAWSSecretAccessKey: "very/secret+value",
		KeyAWSRegion:          "eu-west-3",
		KeyHTTPHeaders:        "Authorization: Bearer abcdefgh12345678\nX-Api-Key: k3y-k3y-k3y\n",
	})
	c, err := LoadCredentials(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Get(KeyAWSAccessKeyID) != "AKIAREDACTME" || c.Get(KeyAWSRegion) != "eu-west-3" || c.Has("..data") {
		t.Errorf("read %v", keys(c.values))
	}
	shown := c.Redact("key AKIAREDACTME secret very/secret+value token abcdefgh12345678 api k3y-k3y-k3y region eu-west-3")
	for _, s := range []string{"AKIAREDACTME", "very/secret+value", "abcdefgh12345678", "k3y-k3y-k3y"} {
		if strings.Contains(shown, s) {
			t.Errorf("%q still shows %q", shown, s)
		}
	}
	if !strings.Contains(shown, "eu-west-3") {
		t.Errorf("%q hides the region, which is no secret", shown)
	}
	if _, err := parseHeaders("Authorization Bearer s3cret"); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("a malformed header line: %v", err)
	}
	if _, err := LoadCredentials(filepath.Join(dir, "absent")); AsError(err).Reason != servingv1alpha1.ReasonAccessDenied {
		t.Errorf("a missing credentials directory: %v", err)
	}
}

func TestFilesThatAreAlsoDirectoriesAreRefused(t *testing.T) {
	err := pathConflicts([]Object{{Key: "1/saved_model.pb"}, {Key: "1/variables"}, {Key: "1/variables/v.index"}})
	if fe := AsError(err); err == nil || fe.Reason != servingv1alpha1.ReasonInvalidLayout {
		t.Fatalf("pathConflicts: %v", err)
	}
	if err := pathConflicts([]Object{{Key: "1/saved_model.pb"}, {Key: "1/variables/v.index"}}); err != nil {
		t.Fatal(err)
	}
}

func TestTheDigestDependsOnContentNotOrder(t *testing.T) {
	a := []fileRecord{{Path: "1/a", Size: 1, SHA256: "x"}, {Path: "1/b", Size: 2, SHA256: "y"}}
	b := []fileRecord{a[1], a[0]}
	if digestOf(a) != digestOf(b) {
		t.Error("the order of the files changes the digest")
	}
	c := []fileRecord{a[0], {Path: "1/b", Size: 2, SHA256: "z"}}
	if digestOf(a) == digestOf(c) {
		t.Error("a file's content does not change the digest")
	}
}

func TestCheckCredentialKeysNamesMissingKeysAndNoValues(t *testing.T) {
	const azureURI = "https://acct.blob.core.windows.net/models/m"
	for _, c := range []struct {
		uri         string
		webIdentity bool
		keys        []string
		bad         bool
	}{
		{"s3://b/m", false, []string{KeyAWSAccessKeyID, KeyAWSSecretAccessKey}, false},
		{"s3://b/m", false, []string{KeyAWSEndpointURL}, false},
		{"s3://b/m", false, []string{KeyAWSAccessKeyID}, true},
		{"s3://b/m", false, []string{"password"}, true},
		{"s3://b/m", true, []string{KeyAWSRegion, KeyAWSEndpointURLSTS}, false},
		{"s3://b/m", true, []string{KeyAWSEndpointURLSTS}, false},
		{"s3://b/m", true, []string{KeyAWSAccessKeyID, KeyAWSSecretAccessKey}, true},
		{"s3://b/m", true, []string{KeyAWSRegion, KeyAWSSecretAccessKey}, true},
		{"gs://b/m", false, []string{KeyGCSServiceAccount}, false},
		{"gs://b/m", false, []string{KeyAWSAccessKeyID, KeyAWSSecretAccessKey}, true},
		{"gs://b/m", true, []string{KeyGCPSTSEndpointURL}, false},
		{"gs://b/m", true, []string{KeyGCSServiceAccount}, true},
		{"https://h/m.tgz", false, []string{KeyHTTPHeaders}, false},
		{"https://h/m.tgz", false, []string{"token"}, true},
		{"/models/m", false, []string{"anything"}, false},
		{"hf://o/r", false, []string{KeyHFToken}, false},
		{"hf://o/r@v1/m", false, []string{KeyHFEndpoint}, false},
		{"hf://o/r", false, []string{"token"}, true},
		{azureURI, false, []string{KeyAzureAccessKey}, false},
		{azureURI, false, []string{KeyAzureSASToken, KeyAzureBlobEndpoint}, false},
		{azureURI, false, []string{KeyAzureTenantID, KeyAzureClientID, KeyAzureClientSecret, KeyAzureAuthorityHost}, false},
		{azureURI, false, []string{KeyAzureClientID, KeyAzureClientSecret}, true},
		{azureURI, false, []string{KeyAzureAccessKey, KeyAzureSASToken}, true},
		{azureURI, false, []string{KeyHTTPHeaders}, true},
		{azureURI, true, []string{KeyAzureBlobEndpoint, KeyAzureAuthorityHost}, false},
		{azureURI, true, []string{KeyAzureAccessKey}, true},
		{azureURI, true, []string{KeyAzureTenantID, KeyAzureClientID, KeyAzureClientSecret}, true},
	} {
		msg := CheckCredentialKeys(c.uri, c.webIdentity, c.keys)
		if (msg != "") != c.bad {
			t.Errorf("%s with keys %v: %q, want a problem: %v", c.uri, c.keys, msg, c.bad)
		}
	}
}

func TestAModelThatDoesNotFitSaysHowMuchSpaceItNeeds(t *testing.T) {
	if err := spaceShortfall(40<<10, 1<<20, 1<<20); err != nil {
		t.Fatalf("40 KiB on a free 1 MiB volume: %v", err)
	}
	err := spaceShortfall(40<<10, 12<<10, 16<<10)
	var fe *Error
	if !errors.As(err, &fe) || fe.Reason != servingv1alpha1.ReasonTooLarge || !fe.Permanent {
		t.Fatalf("40 KiB on a 16 KiB volume: %#v, want a permanent %s", err, servingv1alpha1.ReasonTooLarge)
	}
	for _, want := range []string{"needs 40.0 KiB", "12.0 KiB free of 16.0 KiB", "spec.storage.size to at least 44.0 KiB"} {
		if !strings.Contains(fe.Message, want) {
			t.Errorf("message %q lacks %q", fe.Message, want)
		}
	}
}

// dripReader hands out its bytes a few KiB at a time, as a network body.
type dripReader struct {
	data []byte
	step int
}

func (r *dripReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), r.step)], r.data)
	r.data = r.data[n:]
	return n, nil
}

// writeSizes records the size of every write it is given.
type writeSizes struct {
	sizes []int
	got   []byte
}

func (w *writeSizes) Write(p []byte) (int, error) {
	w.sizes = append(w.sizes, len(p))
	w.got = append(w.got, p...)
	return len(p), nil
}

func TestABodyIsWrittenInWholePiecesHowEverItArrives(t *testing.T) {
	data := patterned(2<<20+3000, 13)
	d := &downloader{maxBytes: 1 << 40, stall: time.Minute, prog: newProgress(1, int64(len(data)))}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var dst writeSizes
	var counted int64
	sha := newPinHash()
	err := d.writeBody(ctx, cancel, &dripReader{data: data, step: 3000}, &dst, capWriter{d: d, name: "f", hash: sha, counted: &counted}, "f")
	if err != nil {
		t.Fatal(err)
	}
	var want []int
	for range 2 * (1 << 20) / fileWriteSize {
		want = append(want, fileWriteSize)
	}
	want = append(want, 3000)
	if fmt.Sprint(dst.sizes) != fmt.Sprint(want) {
		t.Errorf("writes of %v bytes; want %v", dst.sizes, want)
	}
	if !bytes.Equal(dst.got, data) || counted != int64(len(data)) {
		t.Errorf("wrote %d bytes (counted %d), not the body's %d", len(dst.got), counted, len(data))
	}
	if want := sha256.Sum256(data); sha.pinnedSHA256() != hex.EncodeToString(want[:]) {
		t.Error("the hash is not the body's")
	}
}
