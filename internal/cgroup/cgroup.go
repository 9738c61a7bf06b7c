// Package cgroup finds the cgroup this process runs in, in the hierarchy
// that has a given controller.
//
// A controller is in cgroup v2's unified hierarchy, or, on a host that
// still mounts cgroup v1 (alone or beside v2, "hybrid"), in the v1
// hierarchy mounted with it: /proc/self/cgroup names the process's cgroup
// in each hierarchy, and /proc/self/mountinfo where each is mounted. In a
// container the mount's root is the container's own cgroup, so the path is
// taken relative to it.
package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/modelserver-dev/modelserver-operator/internal/mountinfo"
)

// Dir is this process's cgroup in the hierarchy of one controller.
type Dir struct {
	// Path is the cgroup's directory.
	Path string
	// Top is the hierarchy's mount point: Path or an ancestor of it, the
	// highest cgroup whose files this process can read.
	Top string
	// V2 is whether the hierarchy is cgroup v2's, whose files are named
	// differently from v1's (memory.max against memory.limit_in_bytes).
	V2 bool
}

// Find locates this process's cgroup in the hierarchy that has controller
// ("memory", "cpu"); nil when there is none (not Linux, or no hierarchy
// with the controller is mounted). root is where the file system is
// mounted: "/", or elsewhere in tests.
func Find(root, controller string) (*Dir, error) {
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
	h, err := find(cgroups, mounts, controller)
	if err != nil || h == nil {
		return nil, err
	}
	top := filepath.Join(root, h.mountPoint)
	return &Dir{Path: filepath.Join(top, h.relative()), Top: top, V2: h.v2}, nil
}

// Ancestry is the cgroup's directory and its ancestors' up to the
// hierarchy's mount point, the cgroup's first.
func (d *Dir) Ancestry() []string {
	dirs := []string{d.Path}
	for dir := d.Path; dir != d.Top && dir != filepath.Dir(dir); {
		dir = filepath.Dir(dir)
		dirs = append(dirs, dir)
	}
	return dirs
}

// hierarchy is where a cgroup hierarchy is mounted, and the process's
// cgroup in it.
type hierarchy struct {
	cgroup     string // the process's cgroup, as /proc/self/cgroup names it
	mountRoot  string // the cgroup the mount shows at its mount point
	mountPoint string
	v2         bool
}

// relative is the process's cgroup as a path under the mount point: "/"
// when the cgroup is not under the mount's root, where only the root's
// files can be read.
func (h *hierarchy) relative() string {
	r, ok := strings.CutPrefix(h.cgroup, h.mountRoot)
	if !ok || (h.mountRoot != "/" && r != "" && !strings.HasPrefix(r, "/")) {
		return "/"
	}
	return path.Clean("/" + r)
}

// find finds the hierarchy with controller from the contents of
// /proc/self/cgroup and /proc/self/mountinfo; nil if none is mounted.
func find(cgroups, mounts []byte, controller string) (*hierarchy, error) {
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
		case slices.Contains(strings.Split(controllers, ","), controller):
			v1, hasV1 = p, true
		}
	}
	if !hasV1 && !hasV2 {
		return nil, nil
	}
	for _, m := range mountinfo.Parse(mounts) {
		// A v1 hierarchy takes the controller from v2's, so it is the one
		// to use where both are mounted.
		if hasV1 && m.FSType == "cgroup" && slices.Contains(m.SuperOptions, controller) {
			return &hierarchy{cgroup: v1, mountRoot: m.Root, mountPoint: m.MountPoint}, nil
		}
		if !hasV1 && hasV2 && m.FSType == "cgroup2" {
			return &hierarchy{cgroup: v2, mountRoot: m.Root, mountPoint: m.MountPoint, v2: true}, nil
		}
	}
	return nil, nil
}
