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
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/modelserver-dev/modelserver-operator/internal/cgroup"
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
// runs in: the lowest of its own and its ancestors' that it can see (a
// parent's limit bounds its children's, and Kubernetes sets one on the
// pod's cgroup as well as on the container's). ok is false when none of
// them has one. root is where the file system is mounted ("/"; elsewhere
// in tests).
func CgroupLimit(root string) (limit int64, ok bool, err error) {
	d, err := cgroup.Find(root, "memory")
	if err != nil || d == nil {
		return 0, false, err
	}
	for _, dir := range d.Ancestry() {
		l, has, err := readLimit(filepath.Join(dir, LimitFile(d.V2)))
		if err != nil {
			return 0, false, err
		}
		if has && (!ok || l < limit) {
			limit, ok = l, true
		}
	}
	return limit, ok, nil
}

// LimitFile is the name of the file that holds a memory cgroup's limit, in
// cgroup v2 or v1.
func LimitFile(v2 bool) string {
	if v2 {
		return "memory.max"
	}
	return "memory.limit_in_bytes"
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
