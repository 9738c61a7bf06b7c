package localcluster_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
	"github.com/modelserver-dev/modelserver-operator/internal/mountinfo"
	"github.com/modelserver-dev/modelserver-operator/internal/ociimage"
)

// requireRealNode skips, in one line, where the machine cannot run
// containers, unless the run demands a real node (CI on a machine that
// can), where that is a failure.
func requireRealNode(t *testing.T) {
	t.Helper()
	if err := localcluster.RealNodeSupport(""); err != nil {
		if os.Getenv("LOCALCLUSTER_REQUIRE_REAL_NODE") != "" {
			t.Fatalf("LOCALCLUSTER_REQUIRE_REAL_NODE is set, but %v", err)
		}
		t.Skip(err)
	}
}

// probeImage builds testdata/apiprobe into an image in the cluster's
// registry. The binary is built in the cluster's directory, not the
// test's: a test binary killed on purpose (the reaper's test) never runs
// its cleanups, and the reaper removes the cluster's directory.
func probeImage(t *testing.T, c *localcluster.Cluster) string {
	t.Helper()
	bin := filepath.Join(c.Dir, "apiprobe")
	defer func() { _ = os.Remove(bin) }()
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./testdata/apiprobe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build apiprobe: %v\n%s", err, out)
	}
	img, err := ociimage.Build(ociimage.Binary(bin, "/apiprobe", "65532:65532"))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := c.PushImage(context.Background(), img, "localcluster/apiprobe:test")
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// runProbe runs the probe as a restricted pod with a claim of the real
// node's class mounted, and returns what it printed.
func runProbe(t *testing.T, cs kubernetes.Interface, ns, image string) string {
	t.Helper()
	ctx := context.Background()
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
		},
	}
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "apiprobe", Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), FSGroup: ptr.To[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: "probe", Image: image, Command: []string{"/apiprobe"},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"},
			}}},
		},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "the probe pod to succeed", func(ctx context.Context) (bool, string, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "apiprobe", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		if p.Status.Phase == corev1.PodFailed {
			logs, _ := cs.CoreV1().Pods(ns).GetLogs("apiprobe", &corev1.PodLogOptions{}).DoRaw(ctx)
			t.Fatalf("probe pod failed: %s", logs)
		}
		return p.Status.Phase == corev1.PodSucceeded, fmt.Sprintf("phase %s: %v", p.Status.Phase, p.Status.ContainerStatuses), nil
	})
	// Logs come from the kubelet, through the apiserver.
	logs, err := cs.CoreV1().Pods(ns).GetLogs("apiprobe", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("read the probe's logs through the kubelet: %v", err)
	}
	return string(logs)
}

func TestARealNodeRunsPodsThatReachTheAPIServerAndStopLeavesNothing(t *testing.T) {
	requireRealNode(t)
	before := snapshotHost(t)
	c, err := localcluster.Start(context.Background(), localcluster.Options{RealNode: true, Logf: t.Logf})
	if err != nil {
		t.Fatalf("start a cluster with a real node: %v", err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			if t.Failed() {
				t.Log(c.LogTails(30))
			}
			c.Stop()
		}
	})
	cs := clientset(t, c)
	ns := namespace(t, cs)
	out := runProbe(t, cs, ns, probeImage(t, c))
	if !strings.Contains(out, "apiserver v1.37") || !strings.Contains(out, "198.19.0.1:443") {
		t.Errorf("probe output %q: want the apiserver's version through the kubernetes Service at 198.19.0.1:443", out)
	}
	assertUnservedClusterIPRefused(t, cs)
	pv := boundVolume(t, cs, ns, "data")
	if got := pv.Spec.Capacity[corev1.ResourceStorage]; got.String() != "1Mi" || pv.Spec.Local == nil {
		t.Errorf("volume %s: capacity %s, local %v; want a 1Mi local volume", pv.Name, got.String(), pv.Spec.Local)
	}

	dir := c.Dir
	c.Stop()
	stopped = true
	if err := c.TeardownError(); err != nil {
		t.Errorf("teardown: %v", err)
	}
	assertHostClean(t, before, dir)
}

// assertUnservedClusterIPRefused dials an address of the Service range
// that no Service holds: the connection must be refused on the host, not
// answered by whatever lies beyond its default route.
func assertUnservedClusterIPRefused(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	const ip = "198.19.255.254"
	svcs, err := cs.CoreV1().Services("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range svcs.Items {
		if s.Spec.ClusterIP == ip {
			t.Fatalf("Service %s/%s holds %s, which the test needs unheld", s.Namespace, s.Name, ip)
		}
	}
	addr := net.JoinHostPort(ip, "8501")
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err == nil {
		_ = conn.Close()
		t.Errorf("a connection to %s, which no Service holds, was accepted by %s: want it refused on the host", addr, conn.RemoteAddr())
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial %s, which no Service holds: %v; want connection refused", addr, err)
	}
}

func boundVolume(t *testing.T, cs kubernetes.Interface, ns, claim string) *corev1.PersistentVolume {
	t.Helper()
	pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), claim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv, err := cs.CoreV1().PersistentVolumes().Get(context.Background(), pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("claim %s is bound to %q: %v", claim, pvc.Spec.VolumeName, err)
	}
	return pv
}

// holdRealNodeEnv makes the re-executed test binary start a real node, run
// a pod on it, print the cluster's directory and wait to be killed.
const holdRealNodeEnv = "LOCALCLUSTER_TEST_HOLD_REAL_NODE"

func TestAKilledRunsRealNodeIsTornDownByItsReaper(t *testing.T) {
	if os.Getenv(holdRealNodeEnv) != "" {
		holdRealNode(t)
		return
	}
	requireRealNode(t)
	before := snapshotHost(t)
	child, out := reexec(t, "^TestAKilledRunsRealNodeIsTornDownByItsReaper$", holdRealNodeEnv)
	dir := ""
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		line := lines.Text()
		t.Log("child: " + line)
		if rest, ok := strings.CutPrefix(line, "READY "); ok {
			dir = strings.TrimSpace(rest)
			break
		}
	}
	if dir == "" {
		t.Fatal("the child exited without starting a real node")
	}
	if len(pidsNaming(dir)) == 0 {
		t.Fatal("no process of the child's real node is running: nothing to tear down")
	}
	go func() { _, _ = bufio.NewReader(out).WriteTo(os.Stdout) }()

	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitExit(t, child, 10*time.Second)
	assertHostClean(t, before, dir)
}

func holdRealNode(t *testing.T) {
	c, err := localcluster.Start(context.Background(), localcluster.Options{RealNode: true, Logf: t.Logf})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	cs := clientset(t, c)
	ns := namespace(t, cs)
	runProbe(t, cs, ns, probeImage(t, c))
	// A pod still running when the owner dies: its shim, sandbox, veth and
	// mounts are what the reaper must remove.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sleeper", Namespace: ns},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: "sleep", Image: c.Registry + "/localcluster/pause:local", Command: []string{"/pause"},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the sleeper pod to run", func(ctx context.Context) (bool, string, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "sleeper", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return p.Status.Phase == corev1.PodRunning, string(p.Status.Phase), nil
	})
	fmt.Println("READY", c.Dir)
	time.Sleep(5 * time.Minute)
	os.Exit(2)
}

// hostSnapshot is what a real node may change on the host.
type hostSnapshot struct {
	links    []string
	iptables []string
}

func snapshotHost(t *testing.T) hostSnapshot {
	t.Helper()
	release, err := localcluster.HoldRealNodeLock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	return takeSnapshot()
}

func takeSnapshot() hostSnapshot {
	var s hostSnapshot
	entries, _ := os.ReadDir("/sys/class/net")
	for _, e := range entries {
		s.links = append(s.links, e.Name())
	}
	for _, tool := range []string{"iptables-save", "ip6tables-save"} {
		out, _ := exec.Command(tool).Output()
		for _, line := range strings.Split(string(out), "\n") {
			// Rules and user chains; empty built-in chains change nothing.
			if strings.HasPrefix(line, "-A ") || (strings.HasPrefix(line, ":") && !builtinChain(line)) {
				s.iptables = append(s.iptables, tool+" "+line)
			}
		}
	}
	sort.Strings(s.iptables)
	return s
}

func builtinChain(line string) bool {
	name, _, _ := strings.Cut(strings.TrimPrefix(line, ":"), " ")
	switch name {
	case "INPUT", "OUTPUT", "FORWARD", "PREROUTING", "POSTROUTING":
		return true
	}
	return false
}

// assertHostClean waits for the real node's teardown (it holds the lock)
// and checks that nothing of it is left: process, mount, cgroup, bridge,
// veth, iptables rule, shim socket, directory.
func assertHostClean(t *testing.T, before hostSnapshot, dir string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	release, err := localcluster.HoldRealNodeLock(ctx)
	if err != nil {
		t.Fatalf("the real node's teardown did not finish: %v", err)
	}
	defer release()
	after := takeSnapshot()
	if d := diff(before.links, after.links); d != "" {
		t.Errorf("network links changed (bridge or veth left): %s", d)
	}
	if d := diff(before.iptables, after.iptables); d != "" {
		t.Errorf("iptables rules or chains left:\n%s", d)
	}
	if pids := pidsNaming(dir); len(pids) > 0 {
		t.Errorf("processes naming %s still run: %v", dir, pids)
	}
	if m := mountsUnder(dir); len(m) > 0 {
		t.Errorf("mounts left under %s: %v", dir, m)
	}
	for _, h := range []string{"cpu", "memory", "pids", "freezer", "systemd", "unified"} {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", h, "modelserver-localcluster")); err == nil {
			t.Errorf("cgroup %s/modelserver-localcluster left", h)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the cluster's directory %s (containerd's and the kubelet's state) is left (stat: %v)", dir, err)
	}
	if shims, _ := filepath.Glob("/run/containerd/s/*"); len(shims) > 0 {
		t.Errorf("containerd shim sockets left: %v", shims)
	}
}

func diff(before, after []string) string {
	in := map[string]bool{}
	for _, s := range before {
		in[s] = true
	}
	var added []string
	for _, s := range after {
		if !in[s] {
			added = append(added, "+ "+s)
		}
	}
	return strings.Join(added, "\n")
}

func pidsNaming(dir string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), dir) && e.Name() != fmt.Sprint(os.Getpid()) {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return out
}

func mountsUnder(dir string) []string {
	mounts, _ := mountinfo.Read()
	var out []string
	for _, m := range mounts {
		if strings.HasPrefix(m.MountPoint, dir) {
			out = append(out, m.MountPoint)
		}
	}
	return out
}
