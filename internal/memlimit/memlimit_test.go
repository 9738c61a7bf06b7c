package memlimit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Mount lines as the kernel writes them in /proc/self/mountinfo.
const (
	mountV2          = "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
	mountHybridV1    = "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
	mountHybridV2    = "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
	mountHybridCPU   = "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
	mountRootFS      = "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n"
	unlimitedV1Value = "9223372036854771712\n"
)

// tree writes files under a new root: /proc/self/... and /sys/fs/cgroup/...
// as a process would see them.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestCgroupLimitIsTheLowestOfTheProcessCgroupAndItsAncestors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		files  map[string]string
		want   int64
		wantOK bool
	}{{
		name: "v2 container with its own cgroup namespace",
		files: map[string]string{
			"proc/self/cgroup":            "0::/\n",
			"proc/self/mountinfo":         mountRootFS + mountV2,
			"sys/fs/cgroup/memory.max":    "536870912\n",
			"sys/fs/cgroup/cgroup.procs":  "1\n",
			"sys/fs/cgroup/memory.events": "oom_kill 0\n",
		},
		want: 512 << 20, wantOK: true,
	}, {
		name: "v2 process on a host: a parent's limit bounds its child's",
		files: map[string]string{
			"proc/self/cgroup":                                           "0::/system.slice/operator.service/sub\n",
			"proc/self/mountinfo":                                        mountRootFS + mountV2,
			"sys/fs/cgroup/system.slice/memory.max":                      "max\n",
			"sys/fs/cgroup/system.slice/operator.service/memory.max":     "314572800\n",
			"sys/fs/cgroup/system.slice/operator.service/sub/memory.max": "1073741824\n",
		},
		want: 300 << 20, wantOK: true,
	}, {
		name: "v2 with no limit anywhere",
		files: map[string]string{
			"proc/self/cgroup":                    "0::/user.slice\n",
			"proc/self/mountinfo":                 mountV2,
			"sys/fs/cgroup/user.slice/memory.max": "max\n",
		},
	}, {
		name: "v2 cgroup without the memory controller enabled",
		files: map[string]string{
			"proc/self/cgroup":             "0::/a\n",
			"proc/self/mountinfo":          mountV2,
			"sys/fs/cgroup/a/cgroup.procs": "1\n",
		},
	}, {
		name: "hybrid host: the v1 memory hierarchy has the controller, not the unified one",
		files: map[string]string{
			"proc/self/cgroup":                                           "9:pids:/\n4:memory:/process_api/abc\n1:cpu,cpuacct:/\n0::/\n",
			"proc/self/mountinfo":                                        mountRootFS + mountHybridCPU + mountHybridV1 + mountHybridV2,
			"sys/fs/cgroup/memory/memory.limit_in_bytes":                 unlimitedV1Value,
			"sys/fs/cgroup/memory/process_api/memory.limit_in_bytes":     "268435456\n",
			"sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes": unlimitedV1Value,
			"sys/fs/cgroup/unified/memory.max":                           "1048576\n",
		},
		want: 256 << 20, wantOK: true,
	}, {
		name: "v1 container: the mount shows the container's cgroup at its mount point",
		files: map[string]string{
			"proc/self/cgroup": "4:memory:/kubepods/burstable/pod1/c1\n",
			"proc/self/mountinfo": mountRootFS +
				"35 31 0:32 /kubepods/burstable/pod1/c1 /sys/fs/cgroup/memory ro,relatime - cgroup cgroup rw,memory\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "536870912\n",
		},
		want: 512 << 20, wantOK: true,
	}, {
		name: "v1 with memory mounted together with other controllers, at a path with a space",
		files: map[string]string{
			"proc/self/cgroup":    "3:cpu,memory:/job\n",
			"proc/self/mountinfo": `35 31 0:32 / /sys/fs/cgroup/cpu\040memory rw - cgroup cgroup rw,cpu,memory` + "\n",
			"sys/fs/cgroup/cpu memory/job/memory.limit_in_bytes": "1073741824\n",
		},
		want: 1 << 30, wantOK: true,
	}, {
		name: "a cgroup outside the mount's root: only the mount point's limit is read",
		files: map[string]string{
			"proc/self/cgroup": "4:memory:/elsewhere\n",
			"proc/self/mountinfo": mountRootFS +
				"35 31 0:32 /kubepods/pod1/c1 /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes":           "209715200\n",
			"sys/fs/cgroup/memory/elsewhere/memory.limit_in_bytes": "1048576\n",
		},
		want: 200 << 20, wantOK: true,
	}, {
		name:  "no /proc (not Linux)",
		files: map[string]string{"etc/hostname": "x\n"},
	}, {
		name: "no memory controller mounted",
		files: map[string]string{
			"proc/self/cgroup":    "1:cpu,cpuacct:/\n",
			"proc/self/mountinfo": mountRootFS + mountHybridCPU,
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := CgroupLimit(tree(t, tc.files))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("CgroupLimit = %d, %v; want %d, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestCgroupLimitNamesTheFileItCannotRead(t *testing.T) {
	root := tree(t, map[string]string{
		"proc/self/cgroup":           "0::/a\n",
		"proc/self/mountinfo":        mountV2,
		"sys/fs/cgroup/a/memory.max": "lots\n",
	})
	_, _, err := CgroupLimit(root)
	if err == nil || !strings.Contains(err.Error(), "sys/fs/cgroup/a/memory.max") {
		t.Fatalf("err = %v; want one naming sys/fs/cgroup/a/memory.max", err)
	}
	root = tree(t, map[string]string{"proc/self/cgroup": "no colons here\n", "proc/self/mountinfo": mountV2})
	if _, _, err := CgroupLimit(root); err == nil || !strings.Contains(err.Error(), "no colons here") {
		t.Fatalf("err = %v; want one quoting the line", err)
	}
}

func TestGoLimitLeavesATenthOfTheCgroupsLimit(t *testing.T) {
	if got, want := GoLimit(512<<20), int64(483183820); got != want {
		t.Errorf("GoLimit(512 MiB) = %d; want %d", got, want)
	}
}
