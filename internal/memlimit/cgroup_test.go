package memlimit_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelserver-dev/modelserver-operator/internal/memlimit"
	"github.com/modelserver-dev/modelserver-operator/test/machine"
)

// The helper process's modes, in helperEnv.
const (
	helperEnv    = "MEMLIMIT_TEST_HELPER"
	reportLimits = "report"
	churn        = "churn"
)

// Sizes of the churn: a live heap, and garbage allocated beside it, more
// than enough to pass the cgroup's limit at GOGC=100 if nothing stops the
// heap from growing to twice the live heap. The churn allocates as fast as
// memory can be written, and while a collection marks, the heap grows past
// its goal by what was allocated meanwhile: 15 MiB in a 5 ms mark slowed by
// another process. The limit's headroom (10 % of the cgroup's, less the
// runtime's own memory) must hold that: 16 MiB of a 160 MiB cgroup did not
// always; 512 MiB leaves 51 MiB, over three times the overshoot seen.
const (
	liveHeap    = 320 << 20
	cgroupLimit = 512 << 20
	garbage     = 2 << 30
)

// TestHelperProcess is not a test: the tests below run the test binary again
// in a cgroup, and this is what it does there.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("run by the tests below")
	}
	cg, goLimit, err := memlimit.Set("/")
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	if mode == churn {
		live := make([][]byte, 0, liveHeap>>20)
		for range liveHeap >> 20 {
			live = append(live, touched(1<<20))
		}
		var sink []byte
		for range garbage >> 20 {
			sink = touched(1 << 20)
		}
		runtime.KeepAlive(live)
		runtime.KeepAlive(sink)
	}
	fmt.Printf("cgroup %d go %d\n", cg, goLimit)
	os.Exit(0)
}

// touched allocates n bytes and writes to every page, so that they count
// against the cgroup.
func touched(n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 4096 {
		b[i] = 1
	}
	return b
}

// inCgroup runs the helper in a new cgroup limited to limit bytes.
func inCgroup(t *testing.T, limit int64, mode string, env ...string) (out string, oomKills int, err error) {
	t.Helper()
	cg, err := machine.NewCgroup(machine.Limits{MemoryBytes: limit})
	if err != nil {
		// Not root, or cgroup v2 without the memory controller delegated
		// to this process's cgroup.
		t.Skipf("no memory cgroup can be made here: %v", err)
	}
	bin, args := cg.Wrap(os.Args[0], []string{"-test.run=^TestHelperProcess$", "-test.count=1"})
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(os.Environ(), helperEnv+"="+mode, "GOGC=100"), env...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	runErr := cmd.Run()
	kills, err := cg.OOMKills()
	if err != nil {
		t.Error(err)
	}
	if err := cg.RemoveWhenEmpty(5 * time.Second); err != nil {
		t.Errorf("remove %v: %v", cg.Dirs(), err)
	}
	return buf.String(), kills, runErr
}

func TestAProcessReadsTheLimitOfTheCgroupItRunsIn(t *testing.T) {
	out, _, err := inCgroup(t, 200<<20, reportLimits)
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := fmt.Sprintf("cgroup %d go %d", 200<<20, memlimit.GoLimit(200<<20))
	if !strings.Contains(out, want) {
		t.Fatalf("helper said %q; want %q", out, want)
	}
}

// The point of the limit: a heap whose collector would let it grow past
// the cgroup's limit stays below it, where without it the kernel kills the
// process.
func TestTheGoLimitKeepsAChurningHeapInsideTheCgroup(t *testing.T) {
	out, kills, err := inCgroup(t, cgroupLimit, churn)
	if err != nil || kills != 0 {
		t.Fatalf("with the limit: %v, %d OOM kills: %s", err, kills, out)
	}
	if want := fmt.Sprintf("cgroup %d go %d", cgroupLimit, memlimit.GoLimit(cgroupLimit)); !strings.Contains(out, want) {
		t.Fatalf("helper said %q; want %q", out, want)
	}
	out, kills, err = inCgroup(t, cgroupLimit, churn, "GOMEMLIMIT=off")
	if err == nil || kills == 0 {
		t.Fatalf("with GOMEMLIMIT=off the helper was not killed (%v, %d OOM kills): %s", err, kills, out)
	}
}
