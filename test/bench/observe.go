package main

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// instanceLabel names the ModelServer on each object its chart renders.
const instanceLabel = "app.kubernetes.io/instance"

// tracker records, from the harness's own watches (not counted as the
// operator's requests), when each ModelServer was created and when it
// first became Deployed and Ready.
type tracker struct {
	mu       sync.Mutex
	created  map[string]time.Time
	deployed map[string]time.Time
	ready    map[string]time.Time // the ModelServer's Ready condition
	served   map[string]time.Time // its Deployment's ready replicas reached the desired count
	// Once startUpgrade has made them: the ModelServers whose Ready
	// condition has since been other than True, and those whose Service
	// carries the upgrade's chart version (watchUpgradedServices).
	lostReady map[string]time.Time
	upgraded  map[string]time.Time
	// When the harness asked to delete each ModelServer (-delete), and
	// when its watch saw it gone.
	deleteRequested map[string]time.Time
	gone            map[string]time.Time
	// Once startUpdate has made them (-update): each Deployment's
	// generation before the model changed, and the newest generation and
	// time of a rollout since completed; each ModelServer's generation
	// after its patch, and when its Ready condition was True for it.
	rollFrom     map[string]int64
	rolledGen    map[string]int64
	rolled       map[string]time.Time
	updateGen    map[string]int64
	readyUpdated map[string]time.Time
	// steps counts the ModelServers' status writes by the step each made
	// (statusStep), and keeps a few of the messages of each step that
	// stayed in its phase: what the writes per CR are made of.
	steps        counts
	stepExamples map[string][]string
	changed      chan struct{}
	// onServed, if set before watch, is called once for each ModelServer
	// when its Deployment first has its ready replicas.
	onServed func(name string)
}

func newTracker() *tracker {
	return &tracker{
		created:  map[string]time.Time{},
		deployed: map[string]time.Time{},
		ready:    map[string]time.Time{},
		served:   map[string]time.Time{},
		gone:     map[string]time.Time{},
		changed:  make(chan struct{}, 1),

		steps:        counts{},
		stepExamples: map[string][]string{},

		deleteRequested: map[string]time.Time{},
	}
}

// watch starts the informers; they run until ctx ends.
func (t *tracker) watch(ctx context.Context, dyn dynamic.Interface, cs kubernetes.Interface, ns string) {
	df := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, ns, nil)
	msInformer := df.ForResource(servingv1alpha1.GroupVersion.WithResource("modelservers")).Informer()
	onMS := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["status"] != string(metav1.ConditionTrue) {
				if m["type"] == "Ready" {
					t.loseReady(u.GetName())
				}
				continue
			}
			switch m["type"] {
			case "Deployed":
				t.record(t.deployed, u.GetName())
			case "Ready":
				t.record(t.ready, u.GetName())
				gen, _ := m["observedGeneration"].(int64)
				t.readyFor(u.GetName(), gen)
			}
		}
	}
	_, _ = msInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onMS,
		UpdateFunc: func(old, obj any) {
			t.countStep(old, obj)
			onMS(obj)
		},
		DeleteFunc: func(obj any) { t.record(t.gone, deletedName(obj)) },
	})

	kf := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	depInformer := kf.Apps().V1().Deployments().Informer()
	onDep := func(obj any) {
		d, ok := obj.(*appsv1.Deployment)
		if !ok || d.Spec.Replicas == nil || *d.Spec.Replicas == 0 {
			return
		}
		if d.Status.ObservedGeneration >= d.Generation && d.Status.ReadyReplicas >= *d.Spec.Replicas {
			if name := d.Labels[instanceLabel]; t.record(t.served, name) && t.onServed != nil {
				t.onServed(name)
			}
		}
		if rolledOut(d) {
			t.rolledOut(d.Labels[instanceLabel], d.Generation)
		}
	}
	_, _ = depInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onDep,
		UpdateFunc: func(_, obj any) { onDep(obj) },
	})
	df.Start(ctx.Done())
	kf.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), msInformer.HasSynced, depInformer.HasSynced)
}

// deletedName is the name of a deleted object as an informer hands it
// over: the object, or, when the watch missed the deletion and a relist
// found it gone, a tombstone holding its last known state.
func deletedName(obj any) string {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if m, ok := obj.(metav1.Object); ok {
		return m.GetName()
	}
	return ""
}

// record notes the first time name reaches the state in m, and says
// whether this was it.
func (t *tracker) record(m map[string]time.Time, name string) bool {
	if name == "" {
		return false
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, seen := m[name]; seen {
		return false
	}
	m[name] = now
	t.notify()
	return true
}

// notify wakes wait, if it waits; t.mu is held.
func (t *tracker) notify() {
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

// startUpgrade counts, from now on, the ModelServers whose Ready
// condition is seen other than True, and makes the map of those upgraded.
func (t *tracker) startUpgrade() {
	t.mu.Lock()
	t.lostReady, t.upgraded = map[string]time.Time{}, map[string]time.Time{}
	t.mu.Unlock()
}

func (t *tracker) loseReady(name string) {
	t.mu.Lock()
	lost := t.lostReady
	t.mu.Unlock()
	if lost != nil {
		t.record(lost, name)
	}
}

func (t *tracker) lostReadyCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.lostReady)
}

// startUpdate makes the update's maps: from now on, a rollout of a
// Deployment past its generation in from counts, and a Ready condition
// for a generation setUpdated gave.
func (t *tracker) startUpdate(from map[string]int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rollFrom, t.rolledGen, t.rolled = from, map[string]int64{}, map[string]time.Time{}
	t.updateGen, t.readyUpdated = map[string]int64{}, map[string]time.Time{}
}

// rolledOut notes that name's Deployment completed the rollout of gen,
// if that is newer than the update's start and than any noted before:
// an operator may change the pod template more than once, and the last
// rollout is the one that serves the new model.
func (t *tracker) rolledOut(name string, gen int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	from, ok := t.rollFrom[name]
	if !ok || gen <= from || gen <= t.rolledGen[name] {
		return
	}
	t.rolledGen[name], t.rolled[name] = gen, time.Now()
	t.notify()
}

// setUpdated notes the generation name's patch gave it.
func (t *tracker) setUpdated(name string, gen int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.updateGen[name] = gen
}

// readyFor notes name's Ready condition True for generation gen, if the
// update is waiting for that generation or an older one.
func (t *tracker) readyFor(name string, gen int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	want, ok := t.updateGen[name]
	if _, seen := t.readyUpdated[name]; !ok || seen || gen < want {
		return
	}
	t.readyUpdated[name] = time.Now()
	t.notify()
}

func (t *tracker) setDeleteRequested(name string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.deleteRequested[name] = at
}

func (t *tracker) setCreated(name string, at time.Time) {
	t.mu.Lock()
	t.created[name] = at
	t.mu.Unlock()
}

// count returns how many have reached the state in m (one of the
// tracker's maps) so far.
func (t *tracker) count(m map[string]time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(m)
}

// since returns, for each ModelServer that reached the state in m, the
// time from its creation, and the latest time it was reached.
func (t *tracker) since(m map[string]time.Time) ([]time.Duration, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []time.Duration
	var last time.Time
	for name, at := range m {
		c, ok := t.created[name]
		if !ok {
			continue
		}
		out = append(out, at.Sub(c))
		if at.After(last) {
			last = at
		}
	}
	return out, last
}

// after returns, for each ModelServer that reached the state in m, the
// time from start.
func (t *tracker) after(m map[string]time.Time, start time.Time) []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]time.Duration, 0, len(m))
	for _, at := range m {
		out = append(out, at.Sub(start))
	}
	return out
}

// between returns, for each ModelServer that reached both states, the
// time from reaching the one in from to reaching the one in to.
func (t *tracker) between(from, to map[string]time.Time) []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []time.Duration
	for name, end := range to {
		if start, ok := from[name]; ok {
			out = append(out, end.Sub(start))
		}
	}
	return out
}

// afterBoth returns, for each ModelServer Ready and served with a known
// fetch end, the time from the later of its serving and its fetch's end
// to its Ready; and how many fetches ended after their serving pods were
// ready. fetchEnds holds whole seconds, so a fetch counts as ending last
// only when it ended in a later second than its pods became ready.
func (t *tracker) afterBoth(fetchEnds map[string]time.Time) ([]time.Duration, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []time.Duration
	fetchLast := 0
	for name, ready := range t.ready {
		served, ok := t.served[name]
		end, known := fetchEnds[name]
		if !ok || !known {
			continue
		}
		from := served
		if end.Truncate(time.Second).After(served.Truncate(time.Second)) {
			from = end
			fetchLast++
		}
		out = append(out, ready.Sub(from))
	}
	return out, fetchLast
}

// lastOfBoth is when the last ModelServer had both its pods ready and its
// fetch pod exited, by fetchEnds; a ModelServer missing either is left
// out.
func (t *tracker) lastOfBoth(fetchEnds map[string]time.Time) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	var last time.Time
	for name, served := range t.served {
		end, known := fetchEnds[name]
		if !known {
			continue
		}
		last = latest(last, served, end)
	}
	return last
}

func latest(times ...time.Time) time.Time {
	var l time.Time
	for _, t := range times {
		if t.After(l) {
			l = t
		}
	}
	return l
}

// fetchEnds reads, once the run is over, when each ModelServer's fetch pod
// exited: the finishedAt kwok wrote, which counts whole seconds. A list
// after the run, rather than a watch during it, adds nothing to the load
// being measured.
func fetchEnds(ctx context.Context, cs kubernetes.Interface, ns string) (map[string]time.Time, error) {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
		LabelSelector: values.LabelComponent + "=" + values.ComponentFetch,
	})
	if err != nil {
		return nil, err
	}
	ends := map[string]time.Time{}
	for _, p := range pods.Items {
		ms := p.Labels[values.LabelModelServer]
		for _, c := range p.Status.ContainerStatuses {
			if term := c.State.Terminated; term != nil && term.ExitCode == 0 && ms != "" {
				if end := term.FinishedAt.Time; end.After(ends[ms]) {
					ends[ms] = end
				}
			}
		}
	}
	return ends, nil
}

// wait blocks until done reports true, checking at each change and at
// least every second, or until timeout.
func (t *tracker) wait(ctx context.Context, timeout time.Duration, done func() bool) bool {
	deadline := time.After(timeout)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for !done() {
		select {
		case <-ctx.Done():
			return false
		case <-deadline:
			return false
		case <-t.changed:
		case <-tick.C:
		}
	}
	return true
}

// stepExamplesKept bounds the messages kept of each step that stays in its
// phase.
const stepExamplesKept = 3

// countStep counts an update of a ModelServer that changed its status, by
// its step.
func (t *tracker) countStep(oldObj, newObj any) {
	was, ok1 := oldObj.(*unstructured.Unstructured)
	now, ok2 := newObj.(*unstructured.Unstructured)
	if !ok1 || !ok2 {
		return
	}
	// Read in place, not copied: the harness shares the CPUs it measures.
	before, _ := was.Object["status"].(map[string]any)
	after, _ := now.Object["status"].(map[string]any)
	if equality.Semantic.DeepEqual(before, after) {
		return
	}
	step, same := statusStep(before, after)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.steps[step]++
	if msg, _, _ := unstructured.NestedString(after, "message"); same && len(t.stepExamples[step]) < stepExamplesKept {
		t.stepExamples[step] = append(t.stepExamples[step], now.GetName()+": "+msg)
	}
}

// statusStep names a status write by the phases it went from and to
// ("Fetching → Ready"), "Fetching (same phase)" when it stayed, and for an
// operator without a phase, by the conditions that are True.
func statusStep(before, after map[string]any) (step string, samePhase bool) {
	from, to := phaseOrConditions(before), phaseOrConditions(after)
	if from == to {
		return to + " (same phase)", true
	}
	return from + " → " + to, false
}

func phaseOrConditions(status map[string]any) string {
	if p, _, _ := unstructured.NestedString(status, "phase"); p != "" {
		return p
	}
	conds, _, _ := unstructured.NestedSlice(status, "conditions")
	var trueOnes []string
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["status"] == string(metav1.ConditionTrue) {
			trueOnes = append(trueOnes, fmt.Sprint(m["type"]))
		}
	}
	if len(trueOnes) == 0 {
		return "(none)"
	}
	return strings.Join(trueOnes, "+")
}

// stepCounts returns the status writes counted so far, by step, with the
// examples kept.
func (t *tracker) stepCounts() (counts, map[string][]string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.steps), maps.Clone(t.stepExamples)
}
