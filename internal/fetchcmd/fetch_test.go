package fetchcmd

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/fetch"
	"github.com/modelserver-dev/modelserver-operator/internal/fetchcontract"
)

// writeModel writes a one-version SavedModel below dir.
func writeModel(t *testing.T, dir string) {
	t.Helper()
	for name, body := range map[string]string{
		"1/saved_model.pb":          "graph",
		"1/variables/variables.idx": "index",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// runCommand runs `manager fetch args...` with a termination log of its
// own, and returns the exit code, the termination log and stdout.
func runCommand(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	termination := filepath.Join(t.TempDir(), "termination-log")
	var stdout, stderr bytes.Buffer
	code := fetchCommand(context.Background(), append([]string{"--termination-log", termination}, args...), &stdout, &stderr)
	b, _ := os.ReadFile(termination)
	return code, string(b), stdout.String()
}

func TestFetchCommandSucceeds(t *testing.T) {
	src := t.TempDir()
	writeModel(t, src)
	dest := filepath.Join(t.TempDir(), "models", "abc123")
	code, termination, stdout := runCommand(t, "--uri", src, "--dest", dest, "--concurrency", "4", "--timeout", "1m")
	if code != 0 {
		t.Fatalf("exit code %d: %s", code, termination)
	}
	if termination != stdout || strings.Count(termination, "\n") != 1 {
		t.Errorf("termination log %q, stdout %q: want the same one line", termination, stdout)
	}
	s, ok := fetch.ParseSummary(termination)
	if !ok {
		t.Fatalf("the operator cannot read a summary from %q", termination)
	}
	if len(s.Versions) != 1 || s.Files != 2 || s.Bytes != 10 || !strings.HasPrefix(s.Digest, "sha256:") {
		t.Errorf("summary %+v", s)
	}
	if _, err := os.Stat(filepath.Join(dest, "1", "saved_model.pb")); err != nil {
		t.Error(err)
	}
}

func TestFetchCommandExitCodes(t *testing.T) {
	dest := filepath.Join(t.TempDir(), "models", "x")
	cases := []struct {
		name   string
		args   []string
		code   int
		reason string
	}{
		{"a missing model", []string{"--uri", "/does/not/exist", "--dest", dest}, fetchcontract.PermanentFailureExitCode, servingv1alpha1.ReasonNotFound},
		{"a bad URI", []string{"--uri", "ftp://h/m", "--dest", dest}, fetchcontract.PermanentFailureExitCode, servingv1alpha1.ReasonInvalidURI},
		{"no URI", []string{"--dest", dest}, fetchcontract.PermanentFailureExitCode, servingv1alpha1.ReasonInvalidURI},
		{"an unknown flag", []string{"--uri", "/m", "--dest", dest, "--colour", "blue"}, fetchcontract.PermanentFailureExitCode, servingv1alpha1.ReasonFetchFailed},
		{"a token file and no identity", []string{"--uri", "/m", "--dest", dest, "--web-identity-token-file", "/t"}, fetchcontract.PermanentFailureExitCode, servingv1alpha1.ReasonFetchFailed},
		{"two identities", []string{"--uri", "/m", "--dest", dest, "--web-identity-token-file", "/t", "--web-identity-role-arn", "arn:aws:iam::1:role/r",
			"--web-identity-client-id", "00000000-1111-2222-3333-444444444444", "--web-identity-tenant-id", "t"}, fetchcontract.PermanentFailureExitCode, servingv1alpha1.ReasonFetchFailed},
		{"a pod identity association and a role", []string{"--uri", "/m", "--dest", dest, "--web-identity-token-file", "/t", "--eks-pod-identity",
			"--web-identity-role-arn", "arn:aws:iam::1:role/r"}, fetchcontract.PermanentFailureExitCode, servingv1alpha1.ReasonFetchFailed},
		{"GKE's metadata server and a provider", []string{"--uri", "gs://b/m", "--dest", dest, "--web-identity-token-file", "/t", "--gke-workload-identity",
			"--web-identity-provider", "projects/1/locations/global/workloadIdentityPools/p/providers/q"}, fetchcontract.PermanentFailureExitCode, servingv1alpha1.ReasonFetchFailed},
		{"GKE's metadata server and a token file", []string{"--uri", "gs://b/m", "--dest", dest, "--web-identity-token-file", "/t", "--gke-workload-identity"},
			fetchcontract.PermanentFailureExitCode, servingv1alpha1.ReasonFetchFailed},
		{"an application without its tenant", []string{"--uri", "/m", "--dest", dest, "--web-identity-token-file", "/t",
			"--web-identity-client-id", "00000000-1111-2222-3333-444444444444"}, fetchcontract.PermanentFailureExitCode, servingv1alpha1.ReasonFetchFailed},
		// FetchFailed or Timeout, whichever comes first.
		{"a refused connection", []string{"--uri", "http://127.0.0.1:1/m.tar.gz", "--dest", dest, "--timeout", "200ms"}, 1, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, termination, _ := runCommand(t, c.args...)
			if code != c.code {
				t.Errorf("exit code %d; want %d (%s)", code, c.code, termination)
			}
			line := strings.TrimSuffix(termination, "\n")
			// The operator reads the reason the fetcher wrote, not a
			// FetchFailed of its own for a line it cannot read.
			reason, message := fetch.ParseFailure(termination, "")
			if strings.Contains(line, "\n") || reason+": "+message != line || (c.reason != "" && reason != c.reason) {
				t.Errorf("termination message %q; want one line with reason %s", termination, c.reason)
			}
		})
	}
}

// TestThePinsFileNamesTheDigestOfTheDestination: a serving pod's fetch
// finds its pin by the base name of --dest; with no file, or no entry for
// it, the copy is not pinned.
func TestThePinsFileNamesTheDigestOfTheDestination(t *testing.T) {
	src := t.TempDir()
	writeModel(t, src)
	pins := filepath.Join(t.TempDir(), "model-pins.json")
	if err := os.WriteFile(pins, []byte(`{"abc123": {"digest": "sha256:0000"}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, termination, _ := runCommand(t, "--uri", src, "--dest", filepath.Join(t.TempDir(), "abc123"), "--pins", pins)
	if code != fetchcontract.PermanentFailureExitCode || !strings.HasPrefix(termination, servingv1alpha1.ReasonModelChanged+": ") {
		t.Errorf("pinned to another digest: exit code %d, %q", code, termination)
	}
	for _, file := range []string{pins, filepath.Join(t.TempDir(), "missing.json")} {
		if code, termination, _ := runCommand(t, "--uri", src, "--dest", filepath.Join(t.TempDir(), "def456"), "--pins", file); code != 0 {
			t.Errorf("not pinned (%s): exit code %d, %q", file, code, termination)
		}
	}
	if err := os.WriteFile(pins, []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, termination, _ := runCommand(t, "--uri", src, "--dest", filepath.Join(t.TempDir(), "abc123"), "--pins", pins); code != fetchcontract.PermanentFailureExitCode {
		t.Errorf("an unreadable pins file: exit code %d, %q", code, termination)
	}
}

// TestTheSettingsFileBoundsTheFetch: a serving pod's fetch (storage mode
// PerPod) takes its timeout from the settings file the operator keeps in
// the serving ConfigMap, read at its start, in place of --timeout; without
// the file the flags hold, and a file it cannot read fails for good.
func TestTheSettingsFileBoundsTheFetch(t *testing.T) {
	// A store that answers nothing: only the time limit ends the fetch.
	stalled := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(stalled.Close)
	dir := t.TempDir()
	settings := func(body string) string {
		p := filepath.Join(dir, strings.NewReplacer("/", "", " ", "", `"`, "").Replace(body)+".json")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name, settings, timeout string
		code                    int
		reason, within          string
	}{
		{"the file's timeout", settings(`{"timeout": "300ms"}`), "1h", 1, servingv1alpha1.ReasonTimeout, "300ms (spec.fetch.timeout)"},
		{"no file: the flag's", filepath.Join(dir, "missing.json"), "200ms", 1, servingv1alpha1.ReasonTimeout, "200ms (--timeout)"},
		{"the file without a timeout: the flag's", settings(`{}`), "250ms", 1, servingv1alpha1.ReasonTimeout, "250ms (--timeout)"},
		{"a file that is not JSON", settings(`timeout: 1h`), "200ms", fetchcontract.PermanentFailureExitCode, servingv1alpha1.ReasonFetchFailed, ""},
		{"a timeout that is not a duration", settings(`{"timeout": "an hour"}`), "200ms", fetchcontract.PermanentFailureExitCode, servingv1alpha1.ReasonFetchFailed, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dest := filepath.Join(t.TempDir(), "models", "x")
			code, termination, _ := runCommand(t, "--uri", stalled.URL+"/m.tar.gz", "--dest", dest, "--timeout", c.timeout, "--settings", c.settings)
			reason, message := fetch.ParseFailure(termination, "")
			if code != c.code || reason != c.reason || !strings.Contains(message, c.within) {
				t.Errorf("exit code %d, %s: %s; want %d, %s within %s", code, reason, message, c.code, c.reason, c.within)
			}
		})
	}
}
