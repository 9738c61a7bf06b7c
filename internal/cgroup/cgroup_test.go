package cgroup

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

const (
	hybridCgroups = "9:name=systemd:/\n4:memory:/process_api/job\n2:cpuacct:/\n1:cpu,cpuacct:/svc\n0::/\n"
	hybridMounts  = "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n" +
		"32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n" +
		"34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n" +
		"35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n" +
		"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
	v2Mounts = "30 23 0:26 /kubepods/pod1 /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
)

func TestFindTakesEachControllersHierarchy(t *testing.T) {
	for _, tc := range []struct {
		name, cgroups, mounts, controller string
		want                              *Dir // paths under the test's root
	}{
		{"hybrid: cpu is in its v1 hierarchy, mounted with cpuacct", hybridCgroups, hybridMounts, "cpu",
			&Dir{Path: "/sys/fs/cgroup/cpu,cpuacct/svc", Top: "/sys/fs/cgroup/cpu,cpuacct"}},
		{"hybrid: memory in its own", hybridCgroups, hybridMounts, "memory",
			&Dir{Path: "/sys/fs/cgroup/memory/process_api/job", Top: "/sys/fs/cgroup/memory"}},
		{"hybrid: a controller v1 does not mount is in the unified hierarchy", hybridCgroups, hybridMounts, "pids",
			&Dir{Path: "/sys/fs/cgroup/unified", Top: "/sys/fs/cgroup/unified", V2: true}},
		{"v2 in a container: the mount's root is the container's cgroup", "0::/kubepods/pod1/c1\n", v2Mounts, "cpu",
			&Dir{Path: "/sys/fs/cgroup/c1", Top: "/sys/fs/cgroup", V2: true}},
		{"no hierarchy with the controller", "4:memory:/\n", hybridMounts, "cpu", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for name, content := range map[string]string{"proc/self/cgroup": tc.cgroups, "proc/self/mountinfo": tc.mounts} {
				if err := os.MkdirAll(filepath.Join(root, filepath.Dir(name)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Find(root, tc.controller)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil {
				if got != nil {
					t.Errorf("Find = %+v; want none", got)
				}
				return
			}
			want := Dir{Path: filepath.Join(root, tc.want.Path), Top: filepath.Join(root, tc.want.Top), V2: tc.want.V2}
			if got == nil || *got != want {
				t.Errorf("Find = %+v; want %+v", got, want)
			}
		})
	}
}

func TestAncestryEndsAtTheMountPoint(t *testing.T) {
	d := Dir{Path: "/sys/fs/cgroup/memory/a/b", Top: "/sys/fs/cgroup/memory"}
	want := []string{"/sys/fs/cgroup/memory/a/b", "/sys/fs/cgroup/memory/a", "/sys/fs/cgroup/memory"}
	if got := d.Ancestry(); !slices.Equal(got, want) {
		t.Errorf("Ancestry = %q; want %q", got, want)
	}
}
