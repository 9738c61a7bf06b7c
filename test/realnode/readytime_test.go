package realnode

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
	"github.com/modelserver-dev/modelserver-operator/test/realenv"
)

// A step on the way from `kubectl apply` to a Ready ModelServer, as a watch
// of its pods and of the ModelServer sees it. A serving step is reached
// when the last serving pod reaches it.
type step int

const (
	fetchPodCreated step = iota
	fetchRunning
	fetchExited
	servingPodsCreated
	modelSeen      // every serving pod's wait-for-model exited
	servingRunning // every serving container runs
	probePassed    // every serving container passed its startup probe
	podsReady
	modelServerReady
	steps
)

var stepNames = [steps]string{
	"fetch-pod-created", "fetch-running", "fetch-exited", "serving-pods-created",
	"model-seen", "serving-running", "startup-probe-passed", "pods-ready", "modelserver-ready",
}

// BenchmarkApplyToReady times what a user waits for on a real node: from
// `kubectl apply` of a ModelServer (2 replicas, a model of 12 kB from S3) to
// its Ready condition, step by step. Each iteration is a ModelServer in a
// namespace of its own, deleted, with what it made, before the next. Run it
// as `make bench-real-node`; it prints the median of each step's time since
// the apply, and each iteration's.
func BenchmarkApplyToReady(b *testing.B) { benchmarkReady(b, readyCase{}) }

// BenchmarkModelChangeToReady times an upgrade of the model: from `kubectl
// apply` of a new storageUri to a ModelServer that is Ready (2 replicas) to
// its Ready condition at the new generation: the new model fetched beside
// the old, then the pods rolled one at a time without losing capacity. The
// serving steps are the new pods'.
func BenchmarkModelChangeToReady(b *testing.B) { benchmarkReady(b, readyCase{change: true}) }

// BenchmarkSlowLoadToReady is BenchmarkApplyToReady with a model that takes
// 20 s to load, as a large model does in TF Serving, its ports closed all
// along (the double's TFSERVINGDOUBLE_LOAD_SECONDS): what the startup
// probe's period costs in time, and in failed probes the kubelet reports.
// REALNODE_LOAD_SECONDS sets another load time, to see how the reports
// grow with it.
func BenchmarkSlowLoadToReady(b *testing.B) {
	load := 20
	if v := os.Getenv("REALNODE_LOAD_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("REALNODE_LOAD_SECONDS=%q: want a whole number of seconds, at least 1", v)
		}
		load = n
	}
	benchmarkReady(b, readyCase{loadSeconds: load})
}

// readyCase is what a benchmark of the time to Ready applies.
type readyCase struct {
	change      bool // a new model for a Ready ModelServer, rather than a new ModelServer
	loadSeconds int  // how long the double takes to load the model
}

func benchmarkReady(b *testing.B, rc readyCase) {
	e := realNode(b)
	dyn, err := dynamic.NewForConfig(e.Cluster.Config)
	if err != nil {
		b.Fatal(err)
	}
	const replicas = 2
	var podEnv string
	if rc.loadSeconds > 0 {
		podEnv = loadSecondsSpec(strconv.Itoa(rc.loadSeconds))
	}
	first := e.ModelServerYAML(realenv.ModelServer{Name: "ready", URI: halfPlusTwo, Replicas: replicas, SpecExtra: podEnv})
	var runs [][steps]time.Duration
	var failures []float64 // probe failures per run
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		ns := fmt.Sprintf("rn-ready-%d", i)
		e.kubectl(b, "", "create", "namespace", ns)
		e.secret(b, ns, "s3-creds", "")
		apply, tl := first, newTimeline(replicas, map[string]bool{}, 1)
		if rc.change {
			e.kubectl(b, first, "-n", ns, "apply", "-f", "-")
			e.waitReady(b, ns, "ready", 5*time.Minute)
			apply = e.ModelServerYAML(realenv.ModelServer{Name: "ready", URI: twoVersions, Replicas: replicas,
				ModelExtra: "    versionPolicy: {all: {}}\n", SpecExtra: podEnv})
			tl = newTimeline(replicas, e.podNames(b, ns), e.get(b, ns, "ready").Generation+1)
		}
		b.StartTimer()
		runs = append(runs, e.timeToReady(b, dyn, ns, apply, tl))
		b.StopTimer()
		failures = append(failures, float64(e.probeFailures(b, ns)))
		e.kubectl(b, "", "delete", "namespace", ns, "--timeout=2m")
	}
	for s := range steps {
		var at []float64
		for _, r := range runs {
			at = append(at, r[s].Seconds())
		}
		b.ReportMetric(median(at), "s-"+stepNames[s])
	}
	b.ReportMetric(median(failures), "probe-failures")
	var table strings.Builder
	fmt.Fprintf(&table, "seconds since kubectl apply, by iteration:\n%-22s", "step")
	for i := range runs {
		fmt.Fprintf(&table, " %6d", i+1)
	}
	for s := range steps {
		fmt.Fprintf(&table, "\n%-22s", stepNames[s])
		for _, r := range runs {
			fmt.Fprintf(&table, " %6.2f", r[s].Seconds())
		}
	}
	fmt.Fprintf(&table, "\n%-22s", "probe failures")
	for _, f := range failures {
		fmt.Fprintf(&table, " %6.0f", f)
	}
	b.Log(table.String())
}

// probeFailures counts the kubelet's reports of failed probes in ns: each
// is an Event written (or its count raised) while the spam filter lets it.
// The kubelet writes them as it goes; a second is given for the last.
func (e *env) probeFailures(b *testing.B, ns string) int32 {
	time.Sleep(time.Second)
	events, err := e.cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=Unhealthy"})
	if err != nil {
		b.Fatal(err)
	}
	var n int32
	for _, ev := range events.Items {
		n += max(ev.Count, 1)
	}
	return n
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// podNames are the names of the pods in ns now.
func (e *env) podNames(b *testing.B, ns string) map[string]bool {
	pods, err := e.cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	names := map[string]bool{}
	for _, p := range pods.Items {
		names[p.Name] = true
	}
	return names
}

var modelServersResource = schema.GroupVersionResource{Group: servingv1alpha1.GroupVersion.Group, Version: servingv1alpha1.GroupVersion.Version, Resource: "modelservers"}

// timeToReady applies a ModelServer's YAML in ns and returns when tl saw
// each step, counted from just before the apply.
func (e *env) timeToReady(b *testing.B, dyn dynamic.Interface, ns, yaml string, tl *timeline) [steps]time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pods, err := e.cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer pods.Stop()
	servers, err := dyn.Resource(modelServersResource).Namespace(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer servers.Stop()

	var wg sync.WaitGroup
	wg.Go(func() {
		follow(ctx, pods, func(o runtime.Object, at time.Time) {
			if pod, ok := o.(*corev1.Pod); ok {
				tl.sawPod(pod, at)
			}
		})
	})
	wg.Go(func() {
		follow(ctx, servers, func(o runtime.Object, at time.Time) {
			if u, ok := o.(*unstructured.Unstructured); ok {
				tl.sawModelServer(u, at)
			}
		})
	})
	start := time.Now()
	e.kubectl(b, yaml, "-n", ns, "apply", "-f", "-")
	err = wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		return tl.complete(), nil
	})
	cancel()
	wg.Wait()
	if err != nil {
		b.Fatalf("ModelServer %s/ready: not every step seen in 5 minutes: %v\n%s", ns, tl.since(start),
			e.kubectlOut("-n", ns, "get", "modelserver,pods,jobs", "-o", "wide"))
	}
	return tl.since(start)
}

// timeline records when each step was first seen, by pods other than
// those it was told were there before, and the ModelServer's Ready at
// generation or later.
type timeline struct {
	mu         sync.Mutex
	replicas   int
	before     map[string]bool
	generation int64
	fetch      map[step]time.Time
	serving    map[string]map[step]time.Time // by pod name
	ready      time.Time
}

func newTimeline(replicas int, before map[string]bool, generation int64) *timeline {
	return &timeline{replicas: replicas, before: before, generation: generation, fetch: map[step]time.Time{}, serving: map[string]map[step]time.Time{}}
}

// follow hands each object w delivers to saw, with when it arrived, until
// ctx ends or the watch does.
func follow(ctx context.Context, w watch.Interface, saw func(runtime.Object, time.Time)) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			saw(ev.Object, time.Now())
		}
	}
}

// readyNow says whether a ModelServer is Ready at its current generation:
// after a change, its Ready condition stays True for the old one until the
// operator has seen the change.
func readyNow(u *unstructured.Unstructured) bool {
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	if observed != u.GetGeneration() {
		return false
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == servingv1alpha1.ConditionReady && m["status"] == string(metav1.ConditionTrue) {
			return true
		}
	}
	return false
}

// sawPod records the steps pod has reached.
func (tl *timeline) sawPod(pod *corev1.Pod, now time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.before[pod.Name] {
		return
	}
	var seen map[step]time.Time
	var reached []step
	switch pod.Labels[values.LabelComponent] {
	case values.ComponentFetch:
		seen, reached = tl.fetch, fetchSteps(pod)
	case "serving":
		if seen = tl.serving[pod.Name]; seen == nil {
			seen = map[step]time.Time{}
			tl.serving[pod.Name] = seen
		}
		reached = servingSteps(pod)
	default:
		return
	}
	for _, s := range reached {
		if _, ok := seen[s]; !ok {
			seen[s] = now
		}
	}
}

// fetchSteps are the steps a fetch pod's status shows reached.
func fetchSteps(pod *corev1.Pod) []step {
	reached := []step{fetchPodCreated}
	for _, c := range pod.Status.ContainerStatuses {
		if c.State.Running != nil || c.State.Terminated != nil {
			reached = append(reached, fetchRunning)
		}
		if t := c.State.Terminated; t != nil && t.ExitCode == 0 {
			reached = append(reached, fetchExited)
		}
	}
	return reached
}

// servingSteps are the steps a serving pod's status shows reached.
func servingSteps(pod *corev1.Pod) []step {
	reached := []step{servingPodsCreated}
	for _, c := range pod.Status.InitContainerStatuses {
		if t := c.State.Terminated; t != nil && t.ExitCode == 0 {
			reached = append(reached, modelSeen)
		}
	}
	for _, c := range pod.Status.ContainerStatuses {
		if c.State.Running != nil {
			reached = append(reached, servingRunning)
		}
		if c.Started != nil && *c.Started {
			reached = append(reached, probePassed)
		}
		if c.Ready {
			reached = append(reached, podsReady)
		}
	}
	return reached
}

// sawModelServer records the ModelServer's Ready, if it is Ready at the
// generation the timeline waits for: a watch starts with the object as it
// is, Ready at the generation before a change.
func (tl *timeline) sawModelServer(u *unstructured.Unstructured, now time.Time) {
	if !readyNow(u) || u.GetGeneration() < tl.generation {
		return
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.ready.IsZero() {
		tl.ready = now
	}
}

// at is when step s was first seen: for a serving step, when the last of
// the replicas reached it; zero if not yet.
func (tl *timeline) at(s step) time.Time {
	switch {
	case s == modelServerReady:
		return tl.ready
	case s < servingPodsCreated:
		return tl.fetch[s]
	}
	if len(tl.serving) < tl.replicas {
		return time.Time{}
	}
	var last time.Time
	for _, m := range tl.serving {
		t, ok := m[s]
		if !ok {
			return time.Time{}
		}
		if t.After(last) {
			last = t
		}
	}
	return last
}

func (tl *timeline) complete() bool {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for s := range steps {
		if tl.at(s).IsZero() {
			return false
		}
	}
	return true
}

// since is each step's time from start; -1 s for a step not seen.
func (tl *timeline) since(start time.Time) [steps]time.Duration {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var out [steps]time.Duration
	for s := range steps {
		if t := tl.at(s); t.IsZero() {
			out[s] = -time.Second
		} else {
			out[s] = t.Sub(start)
		}
	}
	return out
}
