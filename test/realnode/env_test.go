// Package realnode runs the operator as users run it, on a real node: its
// image built from this tree and pulled by containerd from the cluster's
// registry, `kubectl apply -f dist/install.yaml`, its fetch Jobs
// downloading real SavedModels from a real S3 server (versitygw) into real
// volumes, and serving pods (a TF Serving test double, test/tfservingdouble)
// passing the real readiness probe. Where the machine cannot run
// containers, every test here skips with one line.
package realnode

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
	"github.com/modelserver-dev/modelserver-operator/test/realenv"
)

// The S3 objects every test can use.
const (
	halfPlusTwo      = realenv.HalfPlusTwo
	twoVersions      = realenv.TwoVersions
	corruptedArchive = realenv.CorruptedArchive
	bigModel         = realenv.BigModel
	bigAssetBytes    = realenv.BigAssetBytes
	operatorNS       = realenv.OperatorNamespace
)

// env is the real-node environment the tests share, with the operator
// installed: starting it costs about a minute.
type env struct {
	*realenv.Env
	cs kubernetes.Interface
}

var shared realenv.Shared[*env]

// parallelTests is how many tests run at once: enough for every test that
// calls t.Parallel, and the subtests of those that have them. They wait on
// the kubelet (its back-off, its probes), not the CPU, and the testing
// package starts them in no set order: with its default, GOMAXPROCS (2 in
// CI), the liveness test, the longest, could start after the others and
// the package took 400 s, where the liveness test alone takes 190 s.
const parallelTests = 12

func TestMain(m *testing.M) {
	flag.Parse()
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		_ = flag.Set("test.parallel", strconv.Itoa(parallelTests))
	}
	shared.Main(m, func(e *env) *localcluster.Cluster {
		if e == nil {
			return nil
		}
		return e.Cluster
	})
}

// realNode returns the shared environment, starting it on first use, or
// skips the test in one line where the machine cannot run containers.
// Tests that mostly wait on the kubelet or the fetch call t.Parallel: each
// works in its own namespace, and they all run at once (parallelTests),
// beside the longest, the liveness probe's (about 190 s). Those that run
// alone first measure the operator's own pod, the time from apply to Ready,
// and a rolling update's capacity, which a busy node would blur.
func realNode(t testing.TB) *env {
	t.Helper()
	e := shared.Get(t, func() (*env, error) { return startEnv(t) })
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(e.Cluster.LogTails(20))
			t.Log(e.kubectlOut("-n", operatorNS, "logs", "deploy/modelserver-controller-manager", "--tail=40"))
		}
	})
	return e
}

func startEnv(t testing.TB) (*env, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	re, err := realenv.Start(ctx, realenv.Options{Logf: t.Logf})
	if err != nil {
		return nil, err
	}
	took, err := re.InstallOperator(ctx)
	if err != nil {
		re.Cluster.Stop()
		return nil, err
	}
	t.Logf("the operator's Deployment was available %.1fs after kubectl apply -f dist/install.yaml", took.Seconds())
	cs, err := re.Cluster.Clientset()
	if err != nil {
		re.Cluster.Stop()
		return nil, err
	}
	return &env{Env: re, cs: cs}, nil
}

func (e *env) kubectl(t testing.TB, stdin string, args ...string) string {
	t.Helper()
	out, err := e.Kubectl(stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *env) kubectlOut(args ...string) string {
	out, _ := e.Kubectl("", args...)
	return out
}

// eventsSaying waits up to within for the Events in ns that selector picks
// to hold every one of want, and returns their messages. The operator's
// recorder sends an Event from its own goroutine after the status it goes
// with is written: on a loaded machine it shows seconds later.
func (e *env) eventsSaying(ns, selector string, within time.Duration, want ...string) (string, bool) {
	var messages string
	holdsAll := func() bool {
		for _, w := range want {
			if !strings.Contains(messages, w) {
				return false
			}
		}
		return true
	}
	_ = wait.PollUntilContextTimeout(context.Background(), time.Second, within, true, func(context.Context) (bool, error) {
		messages = e.kubectlOut("-n", ns, "get", "events", "--field-selector", selector, "-o", "jsonpath={.items[*].message}")
		return holdsAll(), nil
	})
	return messages, holdsAll()
}

// eventCounts counts the Events in ns that selector picks, by type/reason,
// each as often as it happened: the kubelet's by their count, the
// operator's by their series.
func (e *env) eventCounts(t testing.TB, ns, selector string) map[string]int {
	t.Helper()
	list, err := e.cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, ev := range list.Items {
		n := max(1, int(ev.Count))
		if ev.Series != nil {
			n = max(n, int(ev.Series.Count))
		}
		counts[ev.Type+"/"+ev.Reason] += n
	}
	return counts
}

// exits counts how often the serving containers of ModelServer name have
// exited: each restart, and one more for a container not running now.
func (e *env) exits(t testing.TB, ns, name string) int {
	t.Helper()
	pods, err := e.cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: values.LabelModelServer + "=" + name + "," + values.LabelComponent + "=serving"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pods.Items {
		for _, c := range p.Status.ContainerStatuses {
			n += int(c.RestartCount)
			if c.State.Running == nil {
				n++
			}
		}
	}
	return n
}

// servingPodsNow says what the ReplicaSets and pods in ns report, a line
// each, for a test that saw the Deployment's counts fall.
func (e *env) servingPodsNow(ctx context.Context, ns string) []string {
	var lines []string
	sets, err := e.cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return []string{"  ReplicaSets: " + err.Error()}
	}
	for _, rs := range sets.Items {
		lines = append(lines, fmt.Sprintf("  ReplicaSet %s: %d wanted (observed generation %d of %d), %d replicas, %d ready, %d available",
			rs.Name, ptr.Deref(rs.Spec.Replicas, 1), rs.Status.ObservedGeneration, rs.Generation, rs.Status.Replicas, rs.Status.ReadyReplicas, rs.Status.AvailableReplicas))
	}
	pods, err := e.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return append(lines, "  pods: "+err.Error())
	}
	for _, p := range pods.Items {
		line := fmt.Sprintf("  pod %s: %s", p.Name, p.Status.Phase)
		if p.DeletionTimestamp != nil {
			line += ", deleting since " + p.DeletionTimestamp.UTC().Format(time.TimeOnly)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				line += fmt.Sprintf(", Ready %s since %s", c.Status, c.LastTransitionTime.UTC().Format(time.TimeOnly))
			}
		}
		for _, c := range p.Status.ContainerStatuses {
			line += fmt.Sprintf(", %s ready %v started %v restarts %d", c.Name, c.Ready, ptr.Deref(c.Started, false), c.RestartCount)
		}
		lines = append(lines, line)
	}
	return lines
}
