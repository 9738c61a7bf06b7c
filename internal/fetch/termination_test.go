package fetch

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// The operator reads what the fetch pod writes: each test writes a
// termination message with TerminationMessage and reads it back as the
// operator does.

func TestASuccessfulFetchSummaryReachesTheOperator(t *testing.T) {
	for _, sum := range []Summary{
		{Versions: []int64{1, 2}, Files: 12, Bytes: 123456, Digest: "sha256:ab", Received: 130000},
		{Versions: []int64{}, Digest: "sha256:00"},
		{Versions: []int64{1}, Files: 4, Bytes: 100, Digest: "sha256:cd", Image: "registry.example.com/team/resnet@sha256:" + strings.Repeat("e", 64), Received: 4200},
	} {
		msg := TerminationMessage(sum, nil)
		// The termination log holds the line and a newline.
		got, ok := ParseSummary(msg + "\n")
		if !ok || !reflect.DeepEqual(got, sum) {
			t.Errorf("ParseSummary(%q) = %+v, %v; want %+v", msg, got, ok, sum)
		}
		if _, failed := ParseSummary(TerminationMessage(Summary{}, errors.New("x"))); failed {
			t.Errorf("ParseSummary reads a failure as a summary")
		}
	}

	ok := TerminationMessage(Summary{Versions: []int64{1, 2}, Files: 12, Bytes: 123456, Digest: "sha256:ab", Received: 130000}, nil)
	if ok != `{"versions":[1,2],"files":12,"bytes":123456,"digest":"sha256:ab","received":130000}` {
		t.Errorf("success message %s", ok)
	}
	var keys map[string]any
	if err := json.Unmarshal([]byte(ok), &keys); err != nil || len(keys) != 5 {
		t.Errorf("success message %s: %v", ok, err)
	}
	// A fetcher of an earlier release did not say what it received.
	if old, _ := ParseSummary(`{"versions":[1],"files":4,"bytes":100,"digest":"sha256:cd"}`); old.Received != -1 {
		t.Errorf("a summary without received: %+v; want Received -1, not known", old)
	}
	// No versions is an empty list, not null: a reader sees zero versions.
	if none := TerminationMessage(Summary{}, nil); !strings.Contains(none, `"versions":[]`) {
		t.Errorf("summary without versions %s", none)
	}
}

func TestAFailedFetchReasonAndMessageReachTheOperator(t *testing.T) {
	long := &Error{Reason: servingv1alpha1.ReasonNotFound, Message: "line one\nline two\t" + strings.Repeat("é", 2000), Permanent: true}
	type failure struct {
		what          string
		err           error
		reason        string
		messagePrefix string
	}
	cases := []failure{
		{"a fetch failure", permanentf(servingv1alpha1.ReasonAccessDenied, "s3://b/m: access denied"), servingv1alpha1.ReasonAccessDenied, "s3://b/m: access denied"},
		{"a message of several lines", &Error{Reason: servingv1alpha1.ReasonInvalidLayout, Message: "no versions\n  under /m"}, servingv1alpha1.ReasonInvalidLayout, "no versions under /m"},
		{"a message over the length limit", long, servingv1alpha1.ReasonNotFound, "line one line two éé"},
		{"an error that is not a fetch failure", errors.New("plain"), servingv1alpha1.ReasonFetchFailed, "plain"},
		{"the deadline", classify(context.DeadlineExceeded, ""), servingv1alpha1.ReasonTimeout, "the fetch did not finish"},
	}
	for _, reason := range []string{
		servingv1alpha1.ReasonNotFound, servingv1alpha1.ReasonAccessDenied, servingv1alpha1.ReasonInvalidLayout,
		servingv1alpha1.ReasonChecksumMismatch, servingv1alpha1.ReasonTooLarge, servingv1alpha1.ReasonTimeout,
		servingv1alpha1.ReasonInvalidURI, servingv1alpha1.ReasonFetchFailed,
	} {
		cases = append(cases, failure{"reason " + reason, transientf(reason, "why"), reason, "why"})
	}
	for _, c := range cases {
		msg := TerminationMessage(Summary{}, c.err)
		if strings.ContainsAny(msg, "\n\r") || len(msg) > 1024 {
			t.Errorf("%s: message of %d bytes, or not one line: %.80q", c.what, len(msg), msg)
		}
		reason, message := ParseFailure(msg+"\n", "the Job's message")
		if reason != c.reason || !strings.HasPrefix(message, c.messagePrefix) {
			t.Errorf("%s: ParseFailure(%.80q) = %s, %.80q; want %s, %q...", c.what, msg, reason, message, c.reason, c.messagePrefix)
		}
	}
	if _, message := ParseFailure(TerminationMessage(Summary{}, long), ""); !strings.HasSuffix(message, "é…") {
		t.Errorf("a cut message ends %q; want it cut between characters, with …", message[len(message)-8:])
	}
}

// A fetcher that crashed, was killed or never started leaves a message of
// its own, or none.
func TestWhatIsNotAFetchFailureIsReportedAsFetchFailed(t *testing.T) {
	for _, c := range []struct{ termination, job, reason, message string }{
		{"NotFound: s3://b/p: no objects\nstack...", "", servingv1alpha1.ReasonNotFound, "s3://b/p: no objects"},
		{"  TooLarge:over  ", "", servingv1alpha1.ReasonTooLarge, "over"},
		{"panic: runtime error", "", servingv1alpha1.ReasonFetchFailed, "panic: runtime error"},
		{"OK: done", "", servingv1alpha1.ReasonFetchFailed, "OK: done"},
		{"", "BackoffLimitExceeded: Job has reached the specified backoff limit", servingv1alpha1.ReasonFetchFailed, "BackoffLimitExceeded: Job has reached the specified backoff limit"},
		{"\n", "", servingv1alpha1.ReasonFetchFailed, "the model-fetch Job failed"},
	} {
		reason, message := ParseFailure(c.termination, c.job)
		if reason != c.reason || message != c.message {
			t.Errorf("ParseFailure(%q, %q) = %q, %q; want %q, %q", c.termination, c.job, reason, message, c.reason, c.message)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 512: "512 B", 1023: "1023 B", 1024: "1.0 KiB", 3 << 19: "1.5 MiB", 1 << 40: "1.0 TiB", 1<<62 + 1<<61: "6.0 EiB",
	} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q; want %q", n, got, want)
		}
	}
}

func TestRunRefusesAnInvalidURIForGood(t *testing.T) {
	for raw, problem := range map[string]string{
		"ftp://h/m":                     "unsupported scheme",
		"https://user:pw@h/m.tgz":       "user info in the URL is not supported",
		"https://x/y#sha256=zz":         "the fragment must be #sha256=<64 hex digits>",
		"s3://b/a//b?X-Amz-Signature=s": "user info and query parameters are not supported",
	} {
		_, err := Run(context.Background(), Options{URI: raw, Dest: t.TempDir()})
		fe := AsError(err)
		if err == nil || fe.Reason != servingv1alpha1.ReasonInvalidURI || !fe.Permanent || ExitCode(err) != ExitPermanent {
			t.Errorf("Run(%q): %v; want a permanent InvalidURI", raw, err)
			continue
		}
		if !strings.HasPrefix(fe.Message, `"`) || !strings.Contains(fe.Message, `": `+problem) {
			t.Errorf("Run(%q): message %q; want the quoted URI, then %q", raw, fe.Message, problem)
		}
		if strings.Contains(fe.Message, "pw") || strings.Contains(fe.Message, "=s") {
			t.Errorf("Run(%q) shows a secret: %q", raw, fe.Message)
		}
	}
}
