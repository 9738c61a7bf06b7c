package machine

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

const spinEnv = "MACHINE_TEST_SPIN"

// TestHelperSpin, run by the tests below in a cgroup, keeps one CPU busy
// for the wall time its environment names.
func TestHelperSpin(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv(spinEnv))
	if err != nil {
		t.Skip("run by the cgroup tests")
	}
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

func TestACPULimitThrottlesTheCommandItWraps(t *testing.T) {
	cg, err := NewCgroup(Limits{CPUs: 0.2, MemoryBytes: 256 << 20})
	if err != nil {
		t.Skipf("no cgroup can be made here (not root, or cgroup v2 without the controllers delegated): %v", err)
	}
	t.Cleanup(func() {
		if err := cg.RemoveWhenEmpty(5 * time.Second); err != nil {
			t.Errorf("remove %v: %v", cg.Dirs(), err)
		}
	})
	bin, args := cg.Wrap(os.Args[0], []string{"-test.run=^TestHelperSpin$", "-test.count=1"})
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), spinEnv+"=1500ms", "GOMAXPROCS=1")
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	wall := time.Since(start)
	used := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	thr, err := cg.CPUThrottling()
	if err != nil {
		t.Fatal(err)
	}
	rate := used.Seconds() / wall.Seconds()
	t.Logf("used %v of CPU in %v (%.2f CPUs); throttled in %d of %d periods, %.2fs", used, wall, rate, thr.Throttled, thr.Periods, thr.Waited)
	// Unlimited, the spin would use its 1.5 s of wall time in CPU; at 0.2
	// CPUs it uses at most a fifth of it, and is throttled. The bound is
	// on the rate, not on how long it waited: on a machine whose other
	// work keeps the spin from its fifth, the spin waits for the CPU, not
	// for the quota (a run beside lint and the cluster suites used 0.14 s
	// and was throttled for 0.11 s).
	if rate > 0.3 || thr.Throttled == 0 {
		t.Errorf("at 0.2 CPUs a 1.5 s spin used %.2f CPUs, throttled in %d of %d periods; want at most 0.3, and throttled",
			rate, thr.Throttled, thr.Periods)
	}
	if kills, err := cg.OOMKills(); err != nil || kills != 0 {
		t.Errorf("OOM kills %d, %v; want 0", kills, err)
	}
	if peak, err := cg.PeakBytes(); err != nil || peak <= 0 {
		t.Errorf("peak charge %d, %v; want the helper's memory", peak, err)
	}
}

func TestWrapQuotesTheCgroupsPaths(t *testing.T) {
	c := &Cgroup{memory: "/sys/fs/cgroup/memory/a b", cpu: "/sys/fs/cgroup/cpu/it's"}
	bin, args := c.Wrap("/bin/true", []string{"x"})
	got := strings.Join(append([]string{bin}, args...), " | ")
	want := `/bin/sh | -c | echo $$ > '/sys/fs/cgroup/memory/a b/cgroup.procs' && echo $$ > '/sys/fs/cgroup/cpu/it'\''s/cgroup.procs' && exec "$0" "$@" | /bin/true | x`
	if got != want {
		t.Errorf("Wrap:\n got %s\nwant %s", got, want)
	}
}

// The bench reads every figure of the cgroup it ran in; those of a
// resource the cgroup does not limit are zero, not an error.
func TestAResourceWithoutALimitReadsAsZero(t *testing.T) {
	cpuOnly, memoryOnly := &Cgroup{cpu: t.TempDir()}, &Cgroup{memory: t.TempDir()}
	if kills, err := cpuOnly.OOMKills(); kills != 0 || err != nil {
		t.Errorf("OOMKills without a memory limit = %d, %v; want 0, nil", kills, err)
	}
	if peak, err := cpuOnly.PeakBytes(); peak != 0 || err != nil {
		t.Errorf("PeakBytes without a memory limit = %d, %v; want 0, nil", peak, err)
	}
	if thr, err := memoryOnly.CPUThrottling(); thr != (Throttling{}) || err != nil {
		t.Errorf("CPUThrottling without a CPU limit = %+v, %v; want zero, nil", thr, err)
	}
}
