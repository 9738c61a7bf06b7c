package main

import (
	"context"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
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
	changed  chan struct{}
}

func newTracker() *tracker {
	return &tracker{
		created:  map[string]time.Time{},
		deployed: map[string]time.Time{},
		ready:    map[string]time.Time{},
		served:   map[string]time.Time{},
		changed:  make(chan struct{}, 1),
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
				continue
			}
			switch m["type"] {
			case "Deployed":
				t.record(t.deployed, u.GetName())
			case "Ready":
				t.record(t.ready, u.GetName())
			}
		}
	}
	_, _ = msInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onMS,
		UpdateFunc: func(_, obj any) { onMS(obj) },
	})

	kf := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	depInformer := kf.Apps().V1().Deployments().Informer()
	onDep := func(obj any) {
		d, ok := obj.(*appsv1.Deployment)
		if !ok || d.Spec.Replicas == nil || *d.Spec.Replicas == 0 {
			return
		}
		if d.Status.ObservedGeneration >= d.Generation && d.Status.ReadyReplicas >= *d.Spec.Replicas {
			t.record(t.served, d.Labels[instanceLabel])
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

func (t *tracker) record(m map[string]time.Time, name string) {
	if name == "" {
		return
	}
	now := time.Now()
	t.mu.Lock()
	if _, seen := m[name]; !seen {
		m[name] = now
		select {
		case t.changed <- struct{}{}:
		default:
		}
	}
	t.mu.Unlock()
}

func (t *tracker) setCreated(name string, at time.Time) {
	t.mu.Lock()
	t.created[name] = at
	t.mu.Unlock()
}

// counts returns how many are Deployed, Ready and served so far.
func (t *tracker) counts() (deployed, ready, served int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.deployed), len(t.ready), len(t.served)
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
