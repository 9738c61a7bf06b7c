package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// deleteWindow ends a run (-delete): every ModelServer deleted from the
// create workers, as a team tearing down an environment deletes them, and
// measured until each is gone and nothing of its release is left.
type deleteWindow struct {
	// Per ModelServer, seconds from its delete request until it is gone
	// from the API: for an operator, once it has uninstalled the release
	// and removed its finalizer; for the floor, whose ModelServers have no
	// finalizer, at once. And from the first request to the last gone.
	TimeToGone     distribution `json:"timeToGone"`
	AllGoneSeconds float64      `json:"allGoneSeconds"`
	// From the first request until nothing of any release is left
	// (remainKinds): the operator's uninstall deletes what Helm made, and
	// the garbage collector what the ModelServers, Deployments and Jobs
	// own.
	AllCleanSeconds float64 `json:"allCleanSeconds"`
	// Per kind, from the first request until the last of its objects was
	// seen deleted: what the clean waited for.
	LastDeletedSeconds map[string]float64 `json:"lastDeletedSeconds"`
	Complete           bool               `json:"complete"`
	// What was still there when the wait gave up, by kind; empty when
	// Complete.
	Left map[string]int `json:"left,omitempty"`
	// The operator's requests from the first delete until none for 15 s,
	// the time of the last of them, and its CPU seconds until then; none
	// for the floor.
	operatorLoad
	// The control plane's CPU seconds from the first request until all
	// was clean, by component, and the harness's own (not in "total").
	ControlPlaneCPUSeconds map[string]float64 `json:"controlPlaneCPUSeconds"`
}

// remainKind is a kind of object a release leaves until it is cleaned up,
// and the label that marks those of the run's releases.
type remainKind struct {
	name     string
	resource schema.GroupVersionResource
	selector string
}

// remainKinds are what N ModelServers' releases make in the run's
// namespace: the chart's objects and what their controllers make carry the
// ModelServer's label; Helm's release records (the operator's and the
// peer's) carry owner=helm.
func remainKinds(records bool) []remainKind {
	kinds := []remainKind{
		{"ConfigMap", corev1.SchemeGroupVersion.WithResource("configmaps"), values.LabelModelServer},
		{"Service", corev1.SchemeGroupVersion.WithResource("services"), values.LabelModelServer},
		{"Deployment", appsv1.SchemeGroupVersion.WithResource("deployments"), values.LabelModelServer},
		{"ReplicaSet", appsv1.SchemeGroupVersion.WithResource("replicasets"), values.LabelModelServer},
		{"Job", batchv1.SchemeGroupVersion.WithResource("jobs"), values.LabelModelServer},
		{"Pod", corev1.SchemeGroupVersion.WithResource("pods"), values.LabelModelServer},
		{"PersistentVolumeClaim", corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"), values.LabelModelServer},
	}
	if records {
		kinds = append(kinds, remainKind{"release record", corev1.SchemeGroupVersion.WithResource("secrets"), "owner=helm"})
	}
	return kinds
}

// remains counts, from metadata-only watches of the harness (not counted
// as the operator's requests), the objects of remainKinds in the run's
// namespace, and when the last of each kind was deleted.
type remains struct {
	stores map[string]cache.Store

	mu          sync.Mutex
	lastDeleted map[string]time.Time
}

func watchRemains(ctx context.Context, cfg *rest.Config, ns string, kinds []remainKind) (*remains, error) {
	client, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	r := &remains{stores: map[string]cache.Store{}, lastDeleted: map[string]time.Time{}}
	var synced []cache.InformerSynced
	for _, k := range kinds {
		f := metadatainformer.NewFilteredSharedInformerFactory(client, 0, ns, func(o *metav1.ListOptions) {
			o.LabelSelector = k.selector
		})
		inf := f.ForResource(k.resource).Informer()
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(any) { r.deleted(k.name, time.Now()) }}); err != nil {
			return nil, err
		}
		r.stores[k.name] = inf.GetStore()
		synced = append(synced, inf.HasSynced)
		f.Start(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil, fmt.Errorf("the watches of what the releases leave did not sync: %w", ctx.Err())
	}
	return r, nil
}

func (r *remains) deleted(kind string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastDeleted[kind] = latest(r.lastDeleted[kind], at)
}

// lastDeletedAfter gives, per kind, the seconds from start to the last
// deletion seen, and the last of all.
func (r *remains) lastDeletedAfter(start time.Time) (map[string]float64, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]float64{}
	last := start
	for kind, at := range r.lastDeleted {
		out[kind] = round(at.Sub(start).Seconds())
		last = latest(last, at)
	}
	return out, last
}

// left maps each kind with objects still there to their number.
func (r *remains) left() map[string]int {
	out := map[string]int{}
	for name, s := range r.stores {
		if n := len(s.ListKeys()); n > 0 {
			out[name] = n
		}
	}
	return out
}

func total(counts map[string]int) int {
	n := 0
	for v := range maps.Values(counts) {
		n += v
	}
	return n
}

// deletion is what deleteAll needs of a run: its cluster and clients, the
// harness's watch of the ModelServers, and, for an operator, its process
// and requests (nil for the floor).
type deletion struct {
	c        *localcluster.Cluster
	admin    *rest.Config
	dyn      dynamic.Interface
	tr       *tracker
	op       *localcluster.Process
	requests *requestLog
	// records: Helm's release records are among what must go; the floor
	// makes none, or with -floor-operator-writes some that nothing owns.
	records bool
}

// deleteAll deletes the n ModelServers from parallelism workers, and waits
// up to timeout until each is gone and nothing of their releases is left,
// then, for an operator, until it has made no request for 15 s.
func deleteAll(ctx context.Context, d deletion, n, parallelism int, timeout time.Duration, log *slog.Logger) (*deleteWindow, error) {
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	rm, err := watchRemains(watchCtx, d.admin, benchNamespace, remainKinds(d.records))
	if err != nil {
		return nil, err
	}
	log.Info("deleting every ModelServer", "left", rm.left())
	w := &deleteWindow{}
	opMeter, err := meterOperator(d.op, d.requests)
	if err != nil {
		return nil, err
	}
	meter := newCPUMeter(d.c)
	start := time.Now()
	modelServers := benchModelServers(d.dyn)
	if err := forEach(ctx, n, parallelism, func(ctx context.Context, i int) error {
		name := crName(i)
		// Before the request: the watch can see it gone before the
		// request returns.
		d.tr.setDeleteRequested(name, time.Now())
		if err := modelServers.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("delete ModelServer %s: %w", name, err)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	lastLog := time.Now()
	w.Complete = d.tr.wait(ctx, timeout, func() bool {
		if d.op != nil && !running(d.op) {
			return true
		}
		gone, left := d.tr.count(d.tr.gone), total(rm.left())
		if time.Since(lastLog) > 10*time.Second {
			log.Info("deleting", "gone", gone, "left", left, "elapsed", time.Since(start).Round(time.Second))
			lastLog = time.Now()
		}
		return gone == n && left == 0
	}) && (d.op == nil || running(d.op))
	w.ControlPlaneCPUSeconds = meter.used()
	w.Left = rm.left()
	w.TimeToGone = distributionOf(d.tr.between(d.tr.deleteRequested, d.tr.gone))
	w.AllGoneSeconds = distributionOf(d.tr.after(d.tr.gone, start)).Max
	var lastDeleted time.Time
	w.LastDeletedSeconds, lastDeleted = rm.lastDeletedAfter(start)
	if w.Complete {
		w.AllCleanSeconds = max(round(lastDeleted.Sub(start).Seconds()), w.AllGoneSeconds)
	}
	if d.op == nil {
		return w, nil
	}
	if !running(d.op) {
		return nil, fmt.Errorf("the operator exited while its ModelServers were deleted")
	}
	err = w.measure(ctx, opMeter, start, timeout, n)
	return w, err
}

// runDeleteWindow runs a delete window if -delete asks for one, and logs
// it as the log's other windows are.
func (cfg config) runDeleteWindow(ctx context.Context, d deletion, n int, log *slog.Logger) (*deleteWindow, error) {
	if !cfg.delete {
		return nil, nil
	}
	w, err := deleteAll(ctx, d, n, cfg.createParallelism, cfg.readyTimeout, log)
	if err != nil {
		return nil, err
	}
	log.Info("deleted", "complete", w.Complete, "allGone", w.AllGoneSeconds, "allClean", w.AllCleanSeconds,
		"left", w.Left, "requests", w.Total, "writes", w.Writes, "controlPlaneCPU", w.ControlPlaneCPUSeconds["total"])
	return w, nil
}

// readyForDelete waits, if -delete asks for a delete window, until the
// garbage collector watches ModelServers (awaitCollector).
func (cfg config) readyForDelete(ctx context.Context, c *localcluster.Cluster, cs kubernetes.Interface, dyn dynamic.Interface, log *slog.Logger) error {
	if !cfg.delete {
		return nil
	}
	return awaitCollector(ctx, c, cs, dyn, log)
}

// gcProbeNamespace holds awaitCollector's probes, apart from what the run
// measures, and probeLabels marks them.
const gcProbeNamespace = "gc-probe"

var probeLabels = map[string]string{"bench.modelserver.dev/gc-probe": "true"}

// awaitCollector waits until kube-controller-manager's garbage collector
// watches ModelServers, as it long has in a cluster whose CRD was
// installed before: it finds a new CRD at its next discovery, up to 30 s
// after the CRD was made. Until then it notices a deleted owner only when
// its backoff checks the owner again, which in a fresh cluster's runs was
// 14–40 s after the ModelServers were gone: the delete window would
// measure that backoff, not the collection. Each probe is a ModelServer
// owning a ConfigMap, deleted: once the ConfigMap goes within a few
// seconds, the collector watches ModelServers.
func awaitCollector(ctx context.Context, c *localcluster.Cluster, cs kubernetes.Interface, dyn dynamic.Interface, log *slog.Logger) error {
	if err := createNamespace(ctx, c, gcProbeNamespace); err != nil {
		return err
	}
	owners := modelServersIn(dyn, gcProbeNamespace)
	start := time.Now()
	for i := 0; time.Since(start) < 2*time.Minute; i++ {
		name := fmt.Sprintf("probe-%d", i)
		ms := modelServer(name)
		ms.SetNamespace(gcProbeNamespace)
		owner, err := owners.Create(ctx, ms, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create the collector's probe: %w", err)
		}
		dependent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: probeLabels, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: name, UID: owner.GetUID(),
		}}}}
		if _, err := cs.CoreV1().ConfigMaps(gcProbeNamespace).Create(ctx, dependent, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create the collector's probe: %w", err)
		}
		if err := owners.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("delete the collector's probe: %w", err)
		}
		collected := waitUntil(ctx, 3*time.Second, func() bool {
			_, err := cs.CoreV1().ConfigMaps(gcProbeNamespace).Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
		if collected {
			log.Info("the garbage collector watches ModelServers", "after", time.Since(start).Round(time.Second), "probes", i+1)
			// The probes the collector has not yet caught up with would
			// go during the run, from what it measures in etcd.
			return cs.CoreV1().ConfigMaps(gcProbeNamespace).DeleteCollection(ctx, metav1.DeleteOptions{},
				metav1.ListOptions{LabelSelector: labels.SelectorFromSet(probeLabels).String()})
		}
	}
	return fmt.Errorf("the garbage collector did not collect what a deleted ModelServer owned within 2 minutes")
}
