package localcluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/modelserver-dev/modelserver-operator/internal/mountinfo"
)

// A real node changes the machine outside the cluster's directory: a bridge,
// iptables chains written by kubelet and kube-proxy, cgroups, mounts, a few
// sysctls, and processes (containerd's shims, the pods' processes) that are
// not children of this one. hostState records what is needed to undo all of
// it, and teardownHost undoes it, whoever calls it: Stop, the reaper left
// behind when the owning process is killed, or the next Start's sweep.

// Names the real node uses on the host. Only one real node runs on a machine
// at a time (see acquireRealNodeLock), so they are fixed, which also lets a
// sweep find what a killed run left.
const (
	bridgeName     = "msbr0"
	cniNetworkName = "modelserver-localcluster"
	cgroupRootName = "modelserver-localcluster"
	hostStateFile  = "realnode.json"
	// cniBinDir is where Debian's containernetworking-plugins put them.
	cniBinDir = "/usr/lib/cni"
)

// chainPrefixes are the iptables chains that kubelet, kube-proxy and the
// CNI plugins create, and the one the real node adds itself
// (unservedChain). No other program on a test machine uses them.
var chainPrefixes = []string{"KUBE-", "CNI-", unservedChain}

// kernelTunables are the sysctls that kubelet, kube-proxy and the CNI bridge
// plugin may set, restored to what they were before the node started.
var kernelTunables = []string{
	"net.ipv4.ip_forward",
	"net.ipv4.conf.all.route_localnet",
	"net.bridge.bridge-nf-call-iptables",
	"net.bridge.bridge-nf-call-ip6tables",
	"vm.overcommit_memory",
	"vm.panic_on_oom",
	"kernel.panic",
	"kernel.panic_on_oops",
	"kernel.keys.root_maxkeys",
	"kernel.keys.root_maxbytes",
}

type hostState struct {
	Sysctls map[string]string `json:"sysctls"`
}

func recordHostState(dir string) error {
	st := hostState{Sysctls: map[string]string{}}
	for _, name := range kernelTunables {
		if v, err := os.ReadFile(sysctlPath(name)); err == nil {
			st.Sysctls[name] = strings.TrimSpace(string(v))
		}
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, hostStateFile), data, 0o600)
}

func sysctlPath(name string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/"))
}

// teardownHost stops everything a real node started under dir and removes
// what it added to the host. Every step runs even when an earlier one
// fails; it can be run any number of times.
func teardownHost(dir string, logf func(string, ...any)) error {
	var st hostState
	if data, err := os.ReadFile(filepath.Join(dir, hostStateFile)); err == nil {
		_ = json.Unmarshal(data, &st)
	}
	var errs []error
	note := func(step string, err error) {
		if err != nil {
			logf("teardown: %s: %v", step, err)
			errs = append(errs, fmt.Errorf("%s: %w", step, err))
		}
	}
	// Pods first, so that nothing restarts them: their processes live in
	// the kubelet's cgroup tree, and the shims that own them name dir.
	shimSockets := shimSocketPaths(dir)
	for range 3 {
		killCgroupTree(cgroupRootName)
		killByCommandLine(dir)
		time.Sleep(200 * time.Millisecond)
	}
	note("remove cgroups", removeCgroupTree(cgroupRootName))
	for _, s := range shimSockets {
		if err := os.Remove(s); err != nil && !errors.Is(err, os.ErrNotExist) {
			note("remove shim socket", err)
		}
	}
	note("unmount", unmountUnder(dir))
	note("delete bridge", deleteBridge(bridgeName))
	for _, tool := range []string{"iptables", "ip6tables"} {
		note("sweep "+tool, sweepIPTables(tool))
	}
	note("remove CNI state", removeCNIState(cniNetworkName))
	for name, v := range st.Sysctls {
		cur, err := os.ReadFile(sysctlPath(name))
		if err == nil && strings.TrimSpace(string(cur)) != v {
			note("restore "+name, os.WriteFile(sysctlPath(name), []byte(v), 0o644))
		}
	}
	return errors.Join(errs...)
}

// cgroupHierarchies are the mounted cgroup v1 hierarchies (and the v2 one,
// if any) under /sys/fs/cgroup.
func cgroupHierarchies() []string {
	var out []string
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return []string{"/sys/fs/cgroup"}
	}
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range entries {
		p := filepath.Join("/sys/fs/cgroup", e.Name())
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
			if _, err := os.Stat(filepath.Join(p, "cgroup.procs")); err == nil {
				out = append(out, p)
			}
		}
	}
	return out
}

// createCgroupRoot makes the cgroup the kubelet puts every pod under, in
// each hierarchy; the kubelet refuses a cgroupRoot that does not exist.
func createCgroupRoot(name string) error {
	for _, h := range cgroupHierarchies() {
		p := filepath.Join(h, name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		// A new cpuset cgroup has no CPUs or memory nodes until given its
		// parent's, and no task can join it before.
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				if err := os.WriteFile(filepath.Join(p, f), v, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func killCgroupTree(name string) {
	for _, h := range cgroupHierarchies() {
		_ = filepath.WalkDir(filepath.Join(h, name), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			return nil
		})
	}
}

// removeCgroupTree removes the cgroups deepest first; a cgroup whose last
// process has just been killed can take a moment to empty.
func removeCgroupTree(name string) error {
	var last error
	for attempt := 0; attempt < 50; attempt++ {
		last = nil
		for _, h := range cgroupHierarchies() {
			root := filepath.Join(h, name)
			var dirs []string
			_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
			sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
			for _, d := range dirs {
				if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
					last = fmt.Errorf("rmdir %s: %w", d, err)
				}
			}
		}
		if last == nil {
			return nil
		}
		killCgroupTree(name)
		time.Sleep(100 * time.Millisecond)
	}
	return last
}

// killByCommandLine kills every process whose command line names dir:
// containerd, its shims (-address dir/...), kubelet, kube-proxy and the
// servers started for the node.
func killByCommandLine(dir string) {
	for _, pid := range pidsNaming(dir) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

func pidsNaming(dir string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(dir)) {
			out = append(out, pid)
		}
	}
	return out
}

// shimSocketPaths are the sockets containerd 1.6's shims create under
// /run/containerd/s (a fixed place, whatever containerd's state dir is);
// each task's bundle records its shim's address.
func shimSocketPaths(dir string) []string {
	matches, _ := filepath.Glob(filepath.Join(dir, "containerd", "state", "io.containerd.runtime.v2.task", "*", "*", "address"))
	var out []string
	for _, m := range matches {
		data, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		addr := strings.TrimSpace(string(data))
		addr = strings.TrimPrefix(strings.TrimPrefix(addr, "unix://"), "ttrpc+unix://")
		if strings.HasPrefix(addr, "/run/containerd/s/") {
			out = append(out, addr)
		}
	}
	return out
}

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) []string {
	mounts, err := mountinfo.Read()
	if err != nil {
		return nil
	}
	var out []string
	for _, m := range mounts {
		if m.MountPoint == dir || strings.HasPrefix(m.MountPoint, dir+"/") {
			out = append(out, m.MountPoint)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

func unmountUnder(dir string) error {
	for attempt := 0; attempt < 10; attempt++ {
		mps := mountsUnder(dir)
		if len(mps) == 0 {
			return nil
		}
		for _, mp := range mps {
			_ = syscall.Unmount(mp, syscall.MNT_DETACH)
		}
	}
	if left := mountsUnder(dir); len(left) > 0 {
		return fmt.Errorf("still mounted: %s", strings.Join(left, ", "))
	}
	return nil
}

func linkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}

// deleteBridge removes the bridge and any veth still attached to it (one
// whose pod network namespace is somehow still held).
func deleteBridge(name string) error {
	if !linkExists(name) {
		return nil
	}
	ports, _ := os.ReadDir(filepath.Join("/sys/class/net", name, "brif"))
	for _, p := range ports {
		_ = exec.Command("ip", "link", "delete", p.Name()).Run()
	}
	if out, err := exec.Command("ip", "link", "delete", name).CombinedOutput(); err != nil && linkExists(name) {
		return fmt.Errorf("ip link delete %s: %v: %s", name, err, out)
	}
	return nil
}

// sweepIPTables removes the KUBE-* and CNI-* chains, and the rules that jump
// to them, from every table, in one iptables-restore per table set.
func sweepIPTables(tool string) error {
	save, err := exec.LookPath(tool + "-save")
	if err != nil {
		return nil // no iptables, nothing can have been written
	}
	out, err := exec.Command(save).Output()
	if err != nil {
		return fmt.Errorf("%s: %w", save, err)
	}
	cleaned, changed := withoutChains(string(out), chainPrefixes)
	if !changed {
		return nil
	}
	cmd := exec.Command(tool+"-restore", "-w", "5")
	cmd.Stdin = strings.NewReader(cleaned)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s-restore: %v: %s", tool, err, out)
	}
	return nil
}

// withoutChains rewrites iptables-save output without the chains whose
// names start with one of prefixes and without any rule in or to them.
// Restoring a table flushes it first, so what is left out is removed.
func withoutChains(save string, prefixes []string) (string, bool) {
	ours := func(chain string) bool {
		for _, p := range prefixes {
			if strings.HasPrefix(chain, p) {
				return true
			}
		}
		return false
	}
	var b strings.Builder
	changed := false
	for _, line := range strings.Split(save, "\n") {
		drop := false
		switch {
		case strings.HasPrefix(line, ":"):
			name, _, _ := strings.Cut(line[1:], " ")
			drop = ours(name)
		case strings.HasPrefix(line, "-A "):
			f := strings.Fields(line)
			drop = ours(f[1])
			for i := 2; i+1 < len(f) && !drop; i++ {
				if (f[i] == "-j" || f[i] == "-g" || f[i] == "--jump" || f[i] == "--goto") && ours(f[i+1]) {
					drop = true
				}
			}
		}
		if drop {
			changed = true
			continue
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return strings.TrimSuffix(b.String(), "\n") + "\n", changed
}

// removeCNIState removes what libcni and host-local keep outside the
// container runtime's configuration: cached results and IP allocations.
func removeCNIState(network string) error {
	var errs []error
	results, _ := filepath.Glob(filepath.Join("/var/lib/cni/results", network+"-*"))
	for _, r := range results {
		errs = append(errs, os.Remove(r))
	}
	errs = append(errs, os.RemoveAll(filepath.Join("/var/lib/cni/networks", network)))
	return errors.Join(errs...)
}
