package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
)

// updateWindow (-update) follows the idle window and the upgrade: every
// ModelServer's model URI changes at once, as a pipeline that retrained
// every model would change them. Each system must fetch the new model and
// roll its serving pods onto it. The floor writes the objects the chart
// renders for the new model (a new fetch Job, the changed ConfigMap and
// Deployment) as one client would, with no operator.
type updateWindow struct {
	// Per ModelServer, seconds from its patch (for the floor, from its
	// first write of the window, since the floor has no operator to react
	// to a patch) until its Deployment completed the rollout of its last
	// pod template with every pod ready; and to the last of them.
	TimeToRolled     distribution `json:"timeToRolled"`
	AllRolledSeconds float64      `json:"allRolledSeconds"`
	// For ours: the same until its Ready condition was True for the
	// patched generation.
	TimeToReady     *distribution `json:"timeToReady,omitempty"`
	AllReadySeconds float64       `json:"allReadySeconds,omitempty"`
	Complete        bool          `json:"complete"`
	NotRolled       int           `json:"notRolled"`
	// An operator's requests until it made none for 15 s; the floor's
	// writes (a create, patch or delete per changed object).
	operatorLoad
	// The control plane's CPU from the first patch until every
	// ModelServer had rolled (and, for ours, was Ready again).
	ControlPlaneCPUSeconds map[string]float64 `json:"controlPlaneCPUSeconds"`
}

// updatedURI is the model URI the window gives name.
func updatedURI(name string) string { return "s3://models/" + name + "-retrained" }

// updating is what the window needs of a run. For an operator: its
// process and requests, and whether its Ready condition says when the
// new model is served. For the floor: the objects it created, which it
// changes into the new model's.
type updating struct {
	c              *localcluster.Cluster
	cs             kubernetes.Interface
	dyn            dynamic.Interface
	tr             *tracker
	op             *localcluster.Process
	requests       *requestLog
	readyCondition bool
	floorObjects   [][]*unstructured.Unstructured
	chartVersion   string
	appVersion     string
}

// runUpdateWindow runs an update window if -update asks for one.
func (cfg config) runUpdateWindow(ctx context.Context, u updating, n, parallelism int, log *slog.Logger) (*updateWindow, error) {
	if !cfg.update {
		return nil, nil
	}
	log.Info("changing every ModelServer's model")
	w, err := updateAll(ctx, u, n, parallelism, cfg.readyTimeout, log)
	if err != nil {
		return nil, err
	}
	log.Info("updated", "complete", w.Complete, "allRolled", w.AllRolledSeconds, "allReady", w.AllReadySeconds,
		"requests", w.Total, "writes", w.Writes, "controlPlaneCPU", w.ControlPlaneCPUSeconds["total"])
	return w, nil
}

func updateAll(ctx context.Context, u updating, n, parallelism int, timeout time.Duration, log *slog.Logger) (*updateWindow, error) {
	gens, err := deploymentGenerations(ctx, u.cs)
	if err != nil {
		return nil, err
	}
	u.tr.startUpdate(gens)
	var floorWork [][]objectChange
	if u.op == nil {
		// The floor's ModelServers say the new model too, and what the
		// chart renders for it is known before the clock starts.
		if floorWork, err = u.floorChanges(ctx, n, parallelism); err != nil {
			return nil, err
		}
	}
	opMeter, err := meterOperator(u.op, u.requests)
	if err != nil {
		return nil, err
	}
	meter := newCPUMeter(u.c)
	start := time.Now()
	w := &updateWindow{}
	patched := make(map[string]time.Time, n)
	if u.op != nil {
		err = u.patchAll(ctx, n, parallelism, patched)
	} else {
		w.Writes, err = applyAll(ctx, u.dyn, floorWork, parallelism)
		w.Total = w.Writes
		for i := range n {
			patched[crName(i)] = start
		}
	}
	if err != nil {
		return nil, err
	}
	w.Complete = u.waitForUpdate(ctx, n, timeout, start, log)
	w.ControlPlaneCPUSeconds = meter.used()
	w.NotRolled = n - u.tr.count(u.tr.rolled)
	w.TimeToRolled = distributionOf(u.tr.between(patched, u.tr.rolled))
	w.AllRolledSeconds = distributionOf(u.tr.after(u.tr.rolled, start)).Max
	if u.readyCondition {
		d := distributionOf(u.tr.between(patched, u.tr.readyUpdated))
		w.TimeToReady, w.AllReadySeconds = &d, distributionOf(u.tr.after(u.tr.readyUpdated, start)).Max
	}
	if u.op == nil {
		w.perCROf(n)
		return w, nil
	}
	if !running(u.op) {
		return nil, fmt.Errorf("the operator exited while the models changed")
	}
	err = w.measure(ctx, opMeter, start, timeout, n)
	return w, err
}

// patch gives name's ModelServer the new model URI, and notes the
// generation that gives it.
func (u updating) patch(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	body, err := json.Marshal(map[string]any{"spec": map[string]any{"model": map[string]any{"storageUri": updatedURI(name)}}})
	if err != nil {
		return nil, err
	}
	ms, err := benchModelServers(u.dyn).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
	if err != nil {
		return nil, fmt.Errorf("change the model of ModelServer %s: %w", name, err)
	}
	u.tr.setUpdated(name, ms.GetGeneration())
	return ms, nil
}

// patchAll patches the n ModelServers, noting when each patch was sent.
func (u updating) patchAll(ctx context.Context, n, parallelism int, patched map[string]time.Time) error {
	times := make([]time.Time, n)
	err := forEach(ctx, n, parallelism, func(ctx context.Context, i int) error {
		times[i] = time.Now()
		_, err := u.patch(ctx, crName(i))
		return err
	})
	for i, at := range times {
		patched[crName(i)] = at
	}
	return err
}

// floorChanges patches the floor's ModelServers and lists, for each, the
// writes from the objects it has to those the chart renders for the new
// model.
func (u updating) floorChanges(ctx context.Context, n, parallelism int) ([][]objectChange, error) {
	work := make([][]objectChange, n)
	err := forEach(ctx, n, parallelism, func(ctx context.Context, i int) error {
		ms, err := u.patch(ctx, crName(i))
		if err != nil {
			return err
		}
		objs, err := render(ms, u.chartVersion, u.appVersion)
		work[i] = changes(u.floorObjects[i], objs)
		return err
	})
	return work, err
}

// applyAll makes each ModelServer's writes from parallelism workers, and
// returns how many it made.
func applyAll(ctx context.Context, dyn dynamic.Interface, work [][]objectChange, parallelism int) (int64, error) {
	counted := make([]int64, len(work))
	err := forEach(ctx, len(work), parallelism, func(ctx context.Context, i int) error {
		made, err := applyChanges(ctx, dyn, work[i])
		counted[i] = made
		return err
	})
	var total int64
	for _, c := range counted {
		total += c
	}
	return total, err
}

// waitForUpdate waits up to timeout until every Deployment has rolled
// onto the new model and, for ours, every ModelServer is Ready for it,
// logging progress every 10 s; it returns whether all are.
func (u updating) waitForUpdate(ctx context.Context, n int, timeout time.Duration, start time.Time, log *slog.Logger) bool {
	lastLog := time.Now()
	return u.tr.wait(ctx, timeout, func() bool {
		if u.op != nil && !running(u.op) {
			return true
		}
		rolled, ready := u.tr.count(u.tr.rolled), n
		if u.readyCondition {
			ready = u.tr.count(u.tr.readyUpdated)
		}
		if time.Since(lastLog) > 10*time.Second {
			log.Info("updating", "rolled", rolled, "ready", ready, "elapsed", time.Since(start).Round(time.Second))
			lastLog = time.Now()
		}
		return rolled == n && ready == n
	}) && (u.op == nil || running(u.op))
}

// rolledOut says d's controller has rolled out its current pod template:
// every pod is of it, and the desired number are ready.
func rolledOut(d *appsv1.Deployment) bool {
	if d.Spec.Replicas == nil {
		return false
	}
	want := *d.Spec.Replicas
	st := d.Status
	return st.ObservedGeneration >= d.Generation && st.UpdatedReplicas == want && st.Replicas == want && st.ReadyReplicas >= want
}

// objectChange is one write that takes an object the chart rendered
// before to what it renders now: a create of a new object, a merge patch
// of the whole rendered object onto a changed one (fields the chart does
// not set, such as a Service's cluster IP, stay), or a delete of one no
// longer rendered.
type objectChange struct {
	verb string
	obj  *unstructured.Unstructured
}

// changes lists the writes from the objects before to those after, new
// and changed objects in the chart's install order, then deletes.
func changes(before, after []*unstructured.Unstructured) []objectChange {
	key := func(o *unstructured.Unstructured) string { return o.GetKind() + "/" + o.GetName() }
	old := make(map[string]*unstructured.Unstructured, len(before))
	for _, o := range before {
		old[key(o)] = o
	}
	var out []objectChange
	for _, o := range after {
		prev, ok := old[key(o)]
		switch {
		case !ok:
			out = append(out, objectChange{"create", o})
		case !equality.Semantic.DeepEqual(prev.Object, o.Object):
			out = append(out, objectChange{"patch", o})
		}
		delete(old, key(o))
	}
	for _, o := range before {
		if _, gone := old[key(o)]; gone {
			out = append(out, objectChange{"delete", o})
		}
	}
	return out
}

// applyChanges makes the writes in order, and returns how many it made.
func applyChanges(ctx context.Context, dyn dynamic.Interface, work []objectChange) (int64, error) {
	var n int64
	for _, ch := range work {
		gvr, _ := meta.UnsafeGuessKindToResource(ch.obj.GroupVersionKind())
		res := dyn.Resource(gvr).Namespace(benchNamespace)
		var err error
		switch ch.verb {
		case "create":
			_, err = res.Create(ctx, ch.obj, metav1.CreateOptions{})
		case "patch":
			var body []byte
			if body, err = json.Marshal(ch.obj.Object); err == nil {
				_, err = res.Patch(ctx, ch.obj.GetName(), types.MergePatchType, body, metav1.PatchOptions{})
			}
		case "delete":
			// As Helm deletes what a release no longer renders.
			err = res.Delete(ctx, ch.obj.GetName(), metav1.DeleteOptions{PropagationPolicy: ptrTo(metav1.DeletePropagationBackground)})
		}
		if err != nil {
			return n, fmt.Errorf("%s %s %s: %w", ch.verb, ch.obj.GetKind(), ch.obj.GetName(), err)
		}
		n++
	}
	return n, nil
}
