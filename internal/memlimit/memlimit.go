// Package memlimit gives the Go runtime a soft memory limit below the
// memory limit of the cgroup the process runs in.
//
// Go's collector paces itself by GOGC alone and knows nothing of a
// container's limit: a heap that grows past it (more ModelServers than the
// limit was sized for) is killed by the kernel, restarted, and killed again
// as it rebuilds its caches. With a soft limit below the cgroup's the
// collector works harder as the heap nears it, so the process slows down
// instead, and reports it (go_gc_* metrics), while the heap still fits.
package memlimit

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"github.com/modelserver-dev/modelserver-operator/internal/mountinfo"
)

// Fraction of the cgroup's limit given to the Go runtime. The rest is for
// what the runtime does not count: the binary's pages, and the kernel's
// memory charged to the cgroup (socket buffers, page tables).
const Fraction = 0.9

// unlimitedV1 is the least value cgroup v1 reports for "no limit"
// (PAGE_COUNTER_MAX pages, rounded down to a page: 9223372036854771712 on
// 4 KiB pages), with room for larger pages.
const unlimitedV1 = 1 << 62

// Set gives the Go runtime a soft memory limit of GoLimit of the cgroup's
// limit, unless GOMEMLIMIT is set (the runtime has applied it already). It
// returns the cgroup's limit and the one it set, or zeros when it set
// none: GOMEMLIMIT is set, or the cgroup has no limit.
func Set(root string) (cgroupLimit, goLimit int64, err error) {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		return 0, 0, nil
	}
	cgroupLimit, ok, err := CgroupLimit(root)
	if err != nil || !ok {
		return 0, 0, err
	}
	goLimit = GoLimit(cgroupLimit)
	debug.SetMemoryLimit(goLimit)
	return cgroupLimit, goLimit, nil
}

// GoLimit is the soft memory limit for the Go runtime in a cgroup limited
// to cgroupLimit bytes.
func GoLimit(cgroupLimit int64) int64 {
	return int64(math.Floor(float64(cgroupLimit) * Fraction))
}

// CgroupLimit is the memory limit, in bytes, of the cgroup this process
// runs in: the lowest of its own and its ancestors' that it can see. ok is
// false when none of them has one. root is where the file system is
// mounted ("/"; elsewhere in tests).
//
// The memory controller is in cgroup v2's unified hierarchy, or, on a host
// that still mounts cgroup v1 (alone or beside v2, "hybrid"), in v1's
// memory hierarchy: /proc/self/cgroup names the process's cgroup in the
// hierarchy that has it, and /proc/self/mountinfo where that hierarchy is
// mounted. In a container the mount's root is the container's own cgroup,
// so the path is taken relative to it.
func CgroupLimit(root string) (limit int64, ok bool, err error) {
	cg, err := Find(root)
	if err != nil || cg == nil {
		return 0, false, err
	}
	return cg.Limit()
}

// Cgroup is the cgroup of this process in the hierarchy that has the
// memory controller.
type Cgroup struct {
	// Dir is its directory, LimitFile the name of the file in it that
	// holds its memory limit: memory.max (v2) or memory.limit_in_bytes (v1).
	Dir, LimitFile string
	top            string // the hierarchy's mount point: Dir or an ancestor
}

// Find locates this process's cgroup in the hierarchy with the memory
// controller; nil when there is none (not Linux, or no memory controller
// mounted).
func Find(root string) (*Cgroup, error) {
	cgroups, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	mounts, err := os.ReadFile(filepath.Join(root, "proc/self/mountinfo"))
	if err != nil {
		return nil, err
	}
	h, err := memoryHierarchy(cgroups, mounts)
	if err != nil || h == nil {
		return nil, err
	}
	top := filepath.Join(root, h.mountPoint)
	return &Cgroup{Dir: filepath.Join(top, h.relative()), LimitFile: h.limitFile, top: top}, nil
}

// Limit is the lowest memory limit of the cgroup and of its ancestors up to
// the hierarchy's mount point: a parent's limit bounds its children's, and
// Kubernetes sets one on the pod's cgroup as well as on the container's.
func (c *Cgroup) Limit() (limit int64, ok bool, err error) {
	for dir := c.Dir; ; dir = filepath.Dir(dir) {
		l, has, err := readLimit(filepath.Join(dir, c.LimitFile))
		if err != nil {
			return 0, false, err
		}
		if has && (!ok || l < limit) {
			limit, ok = l, true
		}
		if dir == c.top || dir == filepath.Dir(dir) {
			return limit, ok, nil
		}
	}
}

// hierarchy is where the cgroup hierarchy that has the memory controller
// is mounted, and the process's cgroup in it.
type hierarchy struct {
	cgroup     string // the process's cgroup, as /proc/self/cgroup names it
	mountRoot  string // the cgroup the mount shows at its mount point
	mountPoint string
	limitFile  string // memory.max (v2) or memory.limit_in_bytes (v1)
}

// relative is the process's cgroup as a path under the mount point: "/"
// when the cgroup is not under the mount's root, where only the root's
// limit can be read.
func (h *hierarchy) relative() string {
	r, ok := strings.CutPrefix(h.cgroup, h.mountRoot)
	if !ok || (h.mountRoot != "/" && r != "" && !strings.HasPrefix(r, "/")) {
		return "/"
	}
	return path.Clean("/" + r)
}

// memoryHierarchy finds the hierarchy with the memory controller from the
// contents of /proc/self/cgroup and /proc/self/mountinfo; nil if none is
// mounted.
func memoryHierarchy(cgroups, mounts []byte) (*hierarchy, error) {
	var v1, v2 string
	var hasV1, hasV2 bool
	for line := range strings.SplitSeq(strings.TrimSpace(string(cgroups)), "\n") {
		// hierarchy-ID:controller-list:cgroup-path
		id, rest, ok1 := strings.Cut(line, ":")
		controllers, p, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("read /proc/self/cgroup: unexpected line %q", line)
		}
		switch {
		case id == "0" && controllers == "":
			v2, hasV2 = p, true
		case slices.Contains(strings.Split(controllers, ","), "memory"):
			v1, hasV1 = p, true
		}
	}
	if !hasV1 && !hasV2 {
		return nil, nil
	}
	for _, m := range mountinfo.Parse(mounts) {
		// A v1 memory hierarchy takes the controller from v2's, so it is
		// the one to read where both are mounted.
		if hasV1 && m.FSType == "cgroup" && slices.Contains(m.SuperOptions, "memory") {
			return &hierarchy{cgroup: v1, mountRoot: m.Root, mountPoint: m.MountPoint, limitFile: "memory.limit_in_bytes"}, nil
		}
		if !hasV1 && hasV2 && m.FSType == "cgroup2" {
			return &hierarchy{cgroup: v2, mountRoot: m.Root, mountPoint: m.MountPoint, limitFile: "memory.max"}, nil
		}
	}
	return nil, nil
}

// readLimit reads a cgroup's memory limit file: has is false for no limit
// ("max" in v2, a value near 2^63 in v1) and where the file does not exist
// (v2's memory controller not enabled for that cgroup; the root cgroup).
func readLimit(file string) (limit int64, has bool, err error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("read %s: %w", file, err)
	}
	if n >= unlimitedV1 {
		return 0, false, nil
	}
	return n, true, nil
}
