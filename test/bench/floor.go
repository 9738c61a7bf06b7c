package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	helmcharts "github.com/modelserver-dev/modelserver-operator/helm-charts"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// floorRun is the time the cluster alone needs for the objects N
// ModelServers render to: created by a client at the operator's
// parallelism, with no operator, no Helm and no release records.
type floorRun struct {
	Parallelism int `json:"parallelism"`
	Objects     int `json:"objects"`
	// OperatorWrites: the floor also made the operator's writes beyond the
	// objects (operatorWrites), and its Ready is the ModelServer's Ready
	// condition.
	OperatorWrites bool `json:"operatorWrites,omitempty"`
	// From the first create to the last object of every ModelServer.
	AllCreatedSeconds float64      `json:"allCreatedSeconds"`
	Created           distribution `json:"timeToCreated"`
	// Per ModelServer, from the first create until its Deployment has its
	// ready replicas: the floor's Ready.
	Ready distribution `json:"timeToReady"`
	// From the first create until every Deployment has its ready replicas.
	AllReadySeconds float64 `json:"allReadySeconds"`
	// The floor's requests are its creates, one per object, and with
	// OperatorWrites 4 more writes per ModelServer; it reads nothing.
	WritesTotal int     `json:"writesTotal"`
	WritesPerCR float64 `json:"writesPerCR"`
	Complete    bool    `json:"complete"`
	// The control plane's CPU seconds from the first create until all
	// were Ready, by component, and the harness's own (not in "total").
	ControlPlaneCPUSeconds map[string]float64 `json:"controlPlaneCPUSeconds"`
	// As an operator's run has them: the control plane's peak RSS, and
	// what the ModelServers and their objects left in etcd.
	ControlPlanePeakRSSMiB map[string]float64 `json:"controlPlanePeakRSSMiB,omitempty"`
	Etcd                   *storage           `json:"etcd,omitempty"`
	LoadAverage            [2]float64         `json:"loadAverage1mStartEnd"`
	// -update: every ModelServer's model changed, and the objects the
	// chart renders for the new one written.
	Update *updateWindow `json:"update,omitempty"`
	// -delete: the ModelServers deleted, the garbage collector deleting
	// what they own.
	Delete *deleteWindow `json:"delete,omitempty"`

	readySeconds []float64
}

// kindOrder is the order Helm installs these kinds in.
var kindOrder = []string{"ConfigMap", "PersistentVolumeClaim", "Service", "Deployment", "Job"}

func runFloor(ctx context.Context, cfg config, n int, log *slog.Logger) (*floorRun, error) {
	log = log.With("operator", "floor", "n", n)
	res := &floorRun{Parallelism: cfg.maxConcurrent, OperatorWrites: cfg.floorWrites}
	res.LoadAverage[0] = loadAverage()
	c, err := startCluster(ctx, cfg, n, log)
	if err != nil {
		return nil, err
	}
	defer c.Stop()
	admin, cs, dyn, err := prepareCluster(ctx, cfg, c, false, log)
	if err != nil {
		return nil, err
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	tr := newTracker()
	extra := operatorWrites{dyn: dyn, cs: cs}
	errs := make(chan error, 3*n) // at most a create, a write after it and one after serving, each
	if cfg.floorWrites {
		if err := watchAsOperator(watchCtx, admin); err != nil {
			return nil, err
		}
		writeAfterServed(watchCtx, tr, extra, n, res.Parallelism, errs)
	}
	tr.watch(watchCtx, dyn, cs, benchNamespace)

	store := newEtcdStore(c.EtcdURL)
	storeBase, err := store.baseline(ctx)
	if err != nil {
		return nil, err
	}
	// The ModelServers exist first, so the objects can be owned by them as
	// the operator's are; rendering is done before the clock starts.
	if err := createModelServers(ctx, dyn, n, cfg.createParallelism, newTracker()); err != nil {
		return nil, err
	}
	ch, err := helmcharts.ModelServer()
	if err != nil {
		return nil, err
	}
	work, err := renderAll(ctx, dyn, n, ch.Metadata.Version, ch.Metadata.AppVersion)
	if err != nil {
		return nil, err
	}
	for _, objs := range work {
		res.Objects += len(objs)
	}

	log.Info("creating objects", "objects", res.Objects, "parallelism", res.Parallelism)
	meter := newCPUMeter(c)
	t0 := time.Now()
	var after *operatorWrites // nil: the objects alone
	if cfg.floorWrites {
		after = &extra
	}
	createAll(ctx, dyn, work, res.Parallelism, tr, t0, after, errs)
	if err := errors.Join(drain(errs)...); err != nil {
		return nil, err
	}
	created, last := tr.since(tr.deployed)
	res.Created = distributionOf(created)
	res.AllCreatedSeconds = round(last.Sub(t0).Seconds())
	readyMap := tr.served
	if cfg.floorWrites {
		readyMap = tr.ready
	}
	res.Complete = tr.wait(ctx, cfg.readyTimeout, func() bool { return tr.count(readyMap) == n })
	res.ControlPlaneCPUSeconds = meter.used()
	res.ControlPlanePeakRSSMiB = controlPlanePeakRSSMiB(c)
	if err := errors.Join(drain(errs)...); err != nil {
		return nil, err
	}
	etcd, err := store.since(ctx, storeBase, n)
	if err != nil {
		return nil, err
	}
	res.Etcd = &etcd
	ready, lastReady := tr.since(readyMap)
	res.Ready = distributionOf(ready)
	res.readySeconds = seconds(ready)
	res.AllReadySeconds = round(lastReady.Sub(t0).Seconds())
	res.WritesTotal = res.Objects
	if cfg.floorWrites {
		res.WritesTotal += 4 * n // the release record, two status writes, the Ready Event
	}
	res.WritesPerCR = round(float64(res.WritesTotal) / float64(n))
	res.LoadAverage[1] = loadAverage()
	log.Info("floor", "allCreated", res.AllCreatedSeconds, "allReady", res.AllReadySeconds, "complete", res.Complete, "controlPlaneCPU", res.ControlPlaneCPUSeconds)
	// The release records of -floor-operator-writes stand for the
	// operator's, but nothing owns them, so nothing deletes them.
	u := updating{c: c, cs: cs, dyn: dyn, tr: tr, floorObjects: work, chartVersion: ch.Metadata.Version, appVersion: ch.Metadata.AppVersion}
	if res.Update, err = cfg.runUpdateWindow(ctx, u, n, res.Parallelism, log); err != nil {
		return nil, err
	}
	d := deletion{c: c, admin: admin, dyn: dyn, tr: tr}
	if res.Delete, err = cfg.runDeleteWindow(ctx, d, n, log); err != nil {
		return nil, err
	}
	return res, nil
}

// writeAfterServed makes, from parallelism workers, the writes the
// operator makes once a ModelServer's pods are ready.
func writeAfterServed(ctx context.Context, tr *tracker, extra operatorWrites, n, parallelism int, errs chan<- error) {
	// Each name comes once, so n never blocks; the workers end with the
	// watch, and nothing closes the channel a late event could send on.
	served := make(chan string, n)
	tr.onServed = func(name string) { served <- name }
	for range parallelism {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case name := <-served:
					if err := extra.afterServed(ctx, name); err != nil {
						errs <- err
					}
				}
			}
		}()
	}
}

// renderAll renders the objects of each of the n ModelServers.
func renderAll(ctx context.Context, dyn dynamic.Interface, n int, chartVersion, appVersion string) ([][]*unstructured.Unstructured, error) {
	work := make([][]*unstructured.Unstructured, n)
	for i := range n {
		u, err := benchModelServers(dyn).Get(ctx, crName(i), metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if work[i], err = render(u, chartVersion, appVersion); err != nil {
			return nil, err
		}
	}
	return work, nil
}

// createAll creates each ModelServer's objects from parallelism workers,
// then the operator's writes after them unless extra is nil, and returns
// when all are done; what fails goes to errs.
func createAll(ctx context.Context, dyn dynamic.Interface, work [][]*unstructured.Unstructured, parallelism int,
	tr *tracker, t0 time.Time, extra *operatorWrites, errs chan<- error) {
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range parallelism {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				name := crName(i)
				tr.setCreated(name, t0)
				for _, obj := range work[i] {
					gvr, _ := meta.UnsafeGuessKindToResource(obj.GroupVersionKind())
					if _, err := dyn.Resource(gvr).Namespace(benchNamespace).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
						errs <- fmt.Errorf("create %s %s: %w", obj.GetKind(), obj.GetName(), err)
						break
					}
				}
				if extra != nil {
					if err := extra.afterCreate(ctx, name); err != nil {
						errs <- err
					}
				}
				tr.record(tr.deployed, name)
			}
		}()
	}
	for i := range len(work) {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
}

// render gives the objects the chart renders for a ModelServer whose
// model is already fetched: what the operator's release ends with.
func render(u *unstructured.Unstructured, chartVersion, appVersion string) ([]*unstructured.Unstructured, error) {
	ms := &servingv1alpha1.ModelServer{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ms); err != nil {
		return nil, err
	}
	const fetchImage = "example.com/modelserver-operator:bench"
	spec, err := values.Validate(ms)
	if err != nil {
		return nil, err
	}
	v, err := spec.Values(values.Inputs{
		ChartVersion: chartVersion, AppVersion: appVersion, FetchImage: fetchImage, Served: spec.AllFetched(),
	})
	if err != nil {
		return nil, err
	}
	m, err := v.Map()
	if err != nil {
		return nil, err
	}
	files, err := helmcharts.Render(m, ms.Name, ms.Namespace)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for name, text := range files {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(text), 4096)
		for {
			obj := &unstructured.Unstructured{}
			if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if len(obj.Object) > 0 {
				objs = append(objs, obj)
			}
		}
	}
	slices.SortFunc(objs, func(a, b *unstructured.Unstructured) int {
		return slices.Index(kindOrder, a.GetKind()) - slices.Index(kindOrder, b.GetKind())
	})
	return objs, nil
}

// drain takes the errors sent so far, without waiting for more.
func drain(errs <-chan error) []error {
	var out []error
	for {
		select {
		case err := <-errs:
			out = append(out, err)
		default:
			return out
		}
	}
}
