package machine

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/modelserver-dev/modelserver-operator/internal/cgroup"
	"github.com/modelserver-dev/modelserver-operator/internal/memlimit"
)

// Limits are what a container's resources limit: memory, in bytes, and
// CPU, in CPU seconds per second. Zero is no limit.
type Limits struct {
	MemoryBytes int64
	CPUs        float64
}

// Cgroup is a cgroup with limits, a child of this process's own, to run a
// command in as a container with those limits would: past the memory
// limit the kernel reclaims and kills within it alone, and it throttles
// the cgroup's processes once they have used their CPU time in a period.
type Cgroup struct {
	// memory and cpu are the cgroup's directories in the hierarchies of
	// those controllers: one on cgroup v2, two on v1; "" where that
	// resource has no limit.
	memory, cpu string
	v2          bool
}

// cgroupPrefix starts the name of every cgroup NewCgroup makes, so that
// one a killed run left behind is found and removed by the next.
const cgroupPrefix = "modelserver-test-"

// cpuPeriod is the length of the period in which a CPU limit's quota is
// counted, in microseconds: the kernel's default, and the kubelet's.
const cpuPeriod = 100000

// NewCgroup makes a cgroup with limits. It needs root, and on cgroup v2 a
// cgroup whose children may have the memory and cpu controllers.
func NewCgroup(l Limits) (*Cgroup, error) {
	c := &Cgroup{}
	var err error
	if l.MemoryBytes > 0 {
		if c.memory, c.v2, err = makeChild("memory"); err != nil {
			return nil, err
		}
		if err := c.write(c.memory, memlimit.LimitFile(c.v2), strconv.FormatInt(l.MemoryBytes, 10)); err != nil {
			return nil, err
		}
	}
	if l.CPUs > 0 {
		if c.cpu, c.v2, err = makeChild("cpu"); err != nil {
			_ = c.Remove()
			return nil, err
		}
		quota := strconv.FormatInt(int64(math.Ceil(l.CPUs*cpuPeriod)), 10)
		if c.v2 {
			err = c.write(c.cpu, "cpu.max", quota+" "+strconv.Itoa(cpuPeriod))
		} else if err = c.write(c.cpu, "cpu.cfs_period_us", strconv.Itoa(cpuPeriod)); err == nil {
			err = c.write(c.cpu, "cpu.cfs_quota_us", quota)
		}
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}

// makeChild makes this process's child cgroup in the hierarchy that has
// controller, or returns the one it made already (cgroup v2 has one
// hierarchy for every controller).
func makeChild(controller string) (dir string, v2 bool, err error) {
	own, err := cgroup.Find("/", controller)
	if err != nil {
		return "", false, err
	}
	if own == nil {
		return "", false, fmt.Errorf("no cgroup hierarchy with the %s controller is mounted", controller)
	}
	removeStale(own.Path)
	dir = filepath.Join(own.Path, cgroupPrefix+strconv.Itoa(os.Getpid()))
	// On v2, where one cgroup has both limits, the first call made it.
	if err := os.Mkdir(dir, 0o755); err != nil && (!own.V2 || !errors.Is(err, os.ErrExist)) {
		return "", false, fmt.Errorf("make a cgroup: %w", err)
	}
	return dir, own.V2, nil
}

// write sets a limit, and removes the cgroup if it cannot.
func (c *Cgroup) write(dir, file, value string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0o644); err != nil {
		_ = c.Remove()
		return fmt.Errorf("set the cgroup's %s (on cgroup v2 its parent must enable the controller for its children): %w", file, err)
	}
	return nil
}

// removeStale removes the cgroups of runs killed before they could remove
// their own: those named after a process that no longer exists. Another
// live run's cgroup stays, even while it is still empty.
func removeStale(parent string) {
	stale, _ := filepath.Glob(filepath.Join(parent, cgroupPrefix+"*"))
	for _, d := range stale {
		pid := strings.TrimPrefix(filepath.Base(d), cgroupPrefix)
		if _, err := os.Stat(filepath.Join("/proc", pid)); errors.Is(err, os.ErrNotExist) {
			_ = os.Remove(d)
		}
	}
}

// Dirs are the cgroup's directories, one per hierarchy it is in.
func (c *Cgroup) Dirs() []string {
	var dirs []string
	for _, d := range []string{c.memory, c.cpu} {
		if d != "" && (len(dirs) == 0 || dirs[0] != d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// Wrap returns the command line that runs binary with args in the cgroup
// from its first instruction: a shell moves itself in, then execs binary,
// keeping its pid, so that nothing binary allocates or runs is counted
// elsewhere.
func (c *Cgroup) Wrap(binary string, args []string) (string, []string) {
	var script strings.Builder
	for _, d := range c.Dirs() {
		fmt.Fprintf(&script, "echo $$ > %s && ", shellQuote(filepath.Join(d, "cgroup.procs")))
	}
	script.WriteString(`exec "$0" "$@"`)
	return "/bin/sh", append([]string{"-c", script.String(), binary}, args...)
}

// shellQuote quotes s as one word for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// OOMKills is how many processes the kernel has killed in the cgroup for
// passing its memory limit; 0 for a cgroup without one.
func (c *Cgroup) OOMKills() (int, error) {
	if c.memory == "" {
		return 0, nil
	}
	file, key := "memory.oom_control", "oom_kill"
	if c.v2 {
		file = "memory.events"
	}
	stat, err := readStat(filepath.Join(c.memory, file))
	if err != nil {
		return 0, err
	}
	n, ok := stat[key]
	if !ok {
		return 0, fmt.Errorf("no %s in %s", key, filepath.Join(c.memory, file))
	}
	return int(n), nil
}

// PeakBytes is the most memory charged to the cgroup at any time since it
// was made: what a container's limit must allow for. It is 0 for a cgroup
// without a memory limit, which is not in the memory hierarchy.
func (c *Cgroup) PeakBytes() (int64, error) {
	if c.memory == "" {
		return 0, nil
	}
	file := "memory.max_usage_in_bytes"
	if c.v2 {
		file = "memory.peak" // Linux 5.19 and later
	}
	b, err := os.ReadFile(filepath.Join(c.memory, file))
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// Throttling is what a CPU limit held back: of the periods in which the
// cgroup's processes ran, those in which they used up their quota and
// waited for the next, and the time they waited.
type Throttling struct {
	Periods, Throttled int64
	Waited             float64 // seconds
}

// CPUThrottling reads the cgroup's throttling since it was made; zero for
// a cgroup without a CPU limit.
func (c *Cgroup) CPUThrottling() (Throttling, error) {
	if c.cpu == "" {
		return Throttling{}, nil
	}
	stat, err := readStat(filepath.Join(c.cpu, "cpu.stat"))
	if err != nil {
		return Throttling{}, err
	}
	t := Throttling{Periods: stat["nr_periods"], Throttled: stat["nr_throttled"]}
	if c.v2 {
		t.Waited = float64(stat["throttled_usec"]) / 1e6
	} else {
		t.Waited = float64(stat["throttled_time"]) / 1e9
	}
	return t, nil
}

// readStat reads a cgroup file of "key value" lines.
func readStat(file string) (map[string]int64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	stat := map[string]int64{}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			stat[k] = n
		}
	}
	return stat, nil
}

// RemoveWhenEmpty removes the cgroup once the kernel has reaped its last
// process, which may be a moment after that process was waited for; it
// gives up after timeout.
func (c *Cgroup) RemoveWhenEmpty(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := c.Remove()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Remove removes the cgroup once no process is left in it.
func (c *Cgroup) Remove() error {
	var errs []error
	for _, d := range c.Dirs() {
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
