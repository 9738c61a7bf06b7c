package e2e

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
)

// TestMakeDemoShowsEachPhaseUntilReady runs what the README tells a
// newcomer to run first, as a script would: `DEMO_EXIT_WHEN_READY=1 make
// demo`, with the containers simulated, as on a machine that cannot run
// them.
func TestMakeDemoShowsEachPhaseUntilReady(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "demo")
	cmd.Dir = repoPath(".")
	cmd.Env = append(os.Environ(), "DEMO_EXIT_WHEN_READY=1", "DEMO_SIMULATED=1")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("make demo: %v after %s\n%s", err, took.Round(time.Second), out)
	}
	t.Logf("DEMO_EXIT_WHEN_READY=1 make demo exited 0 after %s", took.Round(100*time.Millisecond))
	for _, want := range []string{
		"Containers are simulated (DEMO_SIMULATED=1)",
		// Deploying shows only when the pods are slower than the fetch.
		"phase Pending", "phase Fetching", "phase Ready",
		"through the phases Pending → Fetching → ",
		"event Normal Ready: ModelServer is Ready (was ",
		"serving model resnet version 1 (",
		"Running, Ready",
		"REST  http://resnet.default.svc:8501/v1/models/resnet",
		"export KUBECONFIG=",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out)
		}
	}
}

// TestMakeDemoOnTheRealNodeFetchesARealModel runs `DEMO_EXIT_WHEN_READY=1
// make demo` where the machine can run containers, which is where the demo
// then runs: the operator from its image, a real fetch from the S3 server,
// a prediction from the serving pods.
func TestMakeDemoOnTheRealNodeFetchesARealModel(t *testing.T) {
	if err := localcluster.RealNodeSupport(""); err != nil {
		if os.Getenv("LOCALCLUSTER_REQUIRE_REAL_NODE") != "" {
			t.Fatalf("LOCALCLUSTER_REQUIRE_REAL_NODE is set, but %v", err)
		}
		t.Skip(err)
	}
	// The demo waits its turn for the machine's one real node, which the
	// other real-node suites of `make test` may hold for minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "demo")
	cmd.Dir = repoPath(".")
	cmd.Env = append(os.Environ(), "DEMO_EXIT_WHEN_READY=1", "DEMO_SIMULATED=")
	// Interrupted as Ctrl-C does, not killed, at the deadline, so that the
	// demo tears its real node down itself. make waits for its children
	// on SIGINT without passing it on: the whole group gets it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) }
	cmd.WaitDelay = 2 * time.Minute
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("make demo: %v after %s\n%s", err, took.Round(time.Second), out)
	}
	t.Logf("DEMO_EXIT_WHEN_READY=1 make demo on the real node exited 0 after %s", took.Round(100*time.Millisecond))
	for _, want := range []string{
		"On a real node",
		"kubelet, containerd, runc",
		"real S3 server (versitygw)",
		"Simulated: TF Serving",
		"kubectl apply --server-side -f dist/install.yaml",
		"pulled by containerd",
		"phase Ready",
		"through the phases Pending → Fetching → ",
		"event Normal Ready: ModelServer is Ready (was ",
		"serving model half_plus_two version 123 (",
		"Running, Ready",
		"REST  http://half-plus-two.default.svc:8501/v1/models/half_plus_two",
		"Model half_plus_two: versions [123], ",
		", sha256:",
		`"version":"123","state":"AVAILABLE"`,
		`{"predictions":[2.5,3.0,4.5]}`,
		"export KUBECONFIG=",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out)
		}
	}
}

// TestCtrlCStopsTheDemoAndLeavesNothingBehind: without
// DEMO_EXIT_WHEN_READY the demo stays up for exploring, and Ctrl-C takes
// the operator and the control plane down with it.
func TestCtrlCStopsTheDemoAndLeavesNothingBehind(t *testing.T) {
	demo := filepath.Join(t.TempDir(), "demo")
	if out, err := exec.Command("go", "build", "-o", demo, "github.com/modelserver-dev/modelserver-operator/cmd/demo").CombinedOutput(); err != nil {
		t.Fatalf("build the demo: %v\n%s", err, out)
	}
	cmd := exec.Command(demo, "--manager="+managerBinary)
	cmd.Dir = repoPath(".")
	cmd.Env = append(os.Environ(), "DEMO_EXIT_WHEN_READY=", "DEMO_SIMULATED=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := bufio.NewScanner(stdout)
	var kubeconfig string
	for lines.Scan() {
		line := lines.Text()
		out.WriteString(line + "\n")
		if k, ok := strings.CutPrefix(strings.TrimSpace(line), "export KUBECONFIG="); ok {
			kubeconfig = k
		}
		if strings.Contains(line, "stay up until Ctrl-C") {
			break
		}
	}
	go func() {
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	if kubeconfig == "" {
		_ = cmd.Process.Kill()
		t.Fatalf("the demo did not come up and wait:\n%s", out.String())
	}
	select {
	case err := <-exited:
		t.Fatalf("the demo exited (%v) instead of staying up:\n%s", err, out.String())
	case <-time.After(2 * time.Second):
	}
	if _, err := os.Stat(kubeconfig); err != nil {
		t.Fatalf("the printed KUBECONFIG is not there while the demo runs: %v", err)
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		// Its exit status is a shell's for Ctrl-C (130); what matters is
		// that it exits and leaves nothing behind.
		t.Logf("the demo exited after Ctrl-C: %v", err)
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the demo still runs 60s after Ctrl-C")
	}
	if _, err := os.Stat(filepath.Dir(kubeconfig)); !os.IsNotExist(err) {
		t.Errorf("the cluster's directory %s is still there after Ctrl-C (%v)", filepath.Dir(kubeconfig), err)
	}
}
