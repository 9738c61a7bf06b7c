package localcluster_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
)

// holdClusterEnv makes the test binary, re-executed by these tests, start a
// cluster, print its directory and wait to be killed: a stand-in for a test
// run interrupted half way.
const holdClusterEnv = "LOCALCLUSTER_TEST_HOLD_CLUSTER"

func holdCluster() {
	c, err := localcluster.Start(context.Background(), localcluster.Options{
		NodePools: []localcluster.NodePool{{Name: "held", Count: 1, CPU: "4", Memory: "8Gi", Pods: 20}},
	})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	fmt.Println("READY", c.Dir)
	time.Sleep(5 * time.Minute)
	os.Exit(2)
}

// startHeldCluster runs a child test binary holding a cluster and returns
// the child, the cluster's directory and its components' pids.
func startHeldCluster(t *testing.T) (*exec.Cmd, string, []int) {
	t.Helper()
	child, out := reexec(t, "^$", holdClusterEnv)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "READY ") {
		t.Fatalf("child did not start a cluster: %q %v", line, err)
	}
	dir := strings.TrimSpace(strings.TrimPrefix(line, "READY "))
	pids := recordedPIDs(t, filepath.Join(dir, "pids"))
	if len(pids) != len(localcluster.Binaries) {
		t.Fatalf("child recorded %d component pids, want %d", len(pids), len(localcluster.Binaries))
	}
	for _, pid := range pids {
		if !alive(pid) {
			t.Fatalf("component pid %d is not running while the cluster is up", pid)
		}
	}
	return child, dir, pids
}

func TestInterruptedRunLeavesNoProcessOrDirectory(t *testing.T) {
	child, dir, pids := startHeldCluster(t)

	if err := child.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waitExit(t, child, 60*time.Second)
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("component pid %d survived SIGINT of the test binary", pid)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cluster directory %s survived SIGINT of the test binary (stat: %v)", dir, err)
	}
}

func TestKilledRunLeavesNoProcessAndNextStartSweepsItsDirectory(t *testing.T) {
	child, dir, pids := startHeldCluster(t)

	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitExit(t, child, 10*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("component pid %d survived SIGKILL of the test binary", pid)
		}
	}
	localcluster.CleanStale()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("CleanStale left the dead run's directory %s (stat: %v)", dir, err)
	}
}

func waitExit(t *testing.T, child *exec.Cmd, timeout time.Duration) {
	t.Helper()
	// It exits by the signal, so only that it exits tells anything.
	done := make(chan struct{})
	go func() {
		_ = child.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(timeout):
		t.Fatalf("child test binary still running %s after the signal", timeout)
	}
}

func recordedPIDs(t *testing.T, dir string) []int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// alive reports whether pid is a live process; a zombie waiting for a
// reaper that this container may not have counts as dead.
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// reexec runs this test binary again with env set to 1, running the tests
// that match run, and returns it with its stdout; it is killed when the
// test ends.
func reexec(t *testing.T, run, env string) (*exec.Cmd, io.Reader) {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run="+run, "-test.v")
	child.Env = append(os.Environ(), env+"=1")
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	return child, out
}
