package e2e

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestMakeDemoShowsEachPhaseUntilReady runs what the README tells a
// newcomer to run first, as a script would: `DEMO_EXIT_WHEN_READY=1 make
// demo`.
func TestMakeDemoShowsEachPhaseUntilReady(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "demo")
	cmd.Dir = repoPath(".")
	cmd.Env = append(os.Environ(), "DEMO_EXIT_WHEN_READY=1")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("make demo: %v after %s\n%s", err, took.Round(time.Second), out)
	}
	t.Logf("DEMO_EXIT_WHEN_READY=1 make demo exited 0 after %s", took.Round(100*time.Millisecond))
	for _, want := range []string{
		"phase Pending", "phase Fetching", "phase Deploying", "phase Ready",
		"Pending → Fetching → Deploying → Ready",
		"event Normal Fetched: Fetched model resnet from s3://models/resnet: version 1",
		"Running, Ready",
		"REST  http://resnet.default.svc:8501/v1/models/resnet",
		"export KUBECONFIG=",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out)
		}
	}
}
