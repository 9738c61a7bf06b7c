package machine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/modelserver-dev/modelserver-operator/internal/memlimit"
)

// MemoryCgroup is a cgroup with a memory limit, a child of this process's
// own, to run a command in as a container with that limit would: the
// kernel reclaims and, past the limit, kills within it alone.
type MemoryCgroup struct {
	dir, version string
}

// cgroupPrefix starts the name of every cgroup NewMemoryCgroup makes, so
// that one a killed run left behind is found and removed by the next.
const cgroupPrefix = "modelserver-test-"

// NewMemoryCgroup makes a cgroup limited to limit bytes. It needs root, and
// on cgroup v2 a cgroup whose children may have the memory controller.
func NewMemoryCgroup(limit int64) (*MemoryCgroup, error) {
	own, err := memlimit.Find("/")
	if err != nil {
		return nil, err
	}
	if own == nil {
		return nil, errors.New("no cgroup hierarchy with the memory controller is mounted")
	}
	removeStale(own.Dir)
	dir := filepath.Join(own.Dir, cgroupPrefix+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("make a memory cgroup: %w", err)
	}
	c := &MemoryCgroup{dir: dir, version: "v1"}
	if own.LimitFile == "memory.max" {
		c.version = "v2"
	}
	if err := os.WriteFile(filepath.Join(dir, own.LimitFile), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		_ = c.Remove()
		return nil, fmt.Errorf("limit the cgroup's memory (on cgroup v2 its parent must enable the memory controller for its children): %w", err)
	}
	return c, nil
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

// Dir is the cgroup's directory.
func (c *MemoryCgroup) Dir() string { return c.dir }

// Wrap returns the command line that runs binary with args in the cgroup
// from its first instruction: a shell moves itself in, then execs binary,
// keeping its pid, so that nothing binary allocates is charged elsewhere.
func (c *MemoryCgroup) Wrap(binary string, args []string) (string, []string) {
	return "/bin/sh", append([]string{"-c", `echo $$ > "$0" && exec "$@"`, filepath.Join(c.dir, "cgroup.procs"), binary}, args...)
}

// OOMKills is how many processes the kernel has killed in the cgroup for
// passing its memory limit.
func (c *MemoryCgroup) OOMKills() (int, error) {
	file, key := "memory.oom_control", "oom_kill"
	if c.version == "v2" {
		file = "memory.events"
	}
	name := filepath.Join(c.dir, file)
	b, err := os.ReadFile(name)
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("no %s in %s", key, name)
}

// PeakBytes is the most memory charged to the cgroup at any time since it
// was made: what a container's limit must allow for.
func (c *MemoryCgroup) PeakBytes() (int64, error) {
	file := "memory.max_usage_in_bytes"
	if c.version == "v2" {
		file = "memory.peak" // Linux 5.19 and later
	}
	b, err := os.ReadFile(filepath.Join(c.dir, file))
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// Remove removes the cgroup once no process is left in it.
func (c *MemoryCgroup) Remove() error {
	return os.Remove(c.dir)
}
