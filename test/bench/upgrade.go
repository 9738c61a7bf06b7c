package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	helmcharts "github.com/modelserver-dev/modelserver-operator/helm-charts"
	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
	"github.com/modelserver-dev/modelserver-operator/test/machine"
	"github.com/modelserver-dev/modelserver-operator/test/nextchart"
)

// upgradeWindow follows the idle window (-upgrade): the operator is
// replaced by a build of the next release, whose chart has the next
// version and a new annotation on the Service (nextchart.Change), as an
// operator upgrade replaces the image of its Deployment. Every release
// must then be upgraded, with no pod restarted, since the change is
// nothing the pods see.
type upgradeWindow struct {
	ChartVersion string `json:"chartVersion"`
	// Releases whose live Service carries the new chart version.
	Upgraded int `json:"upgraded"`
	// Per release, seconds from the new process's start to its Service
	// carrying the new version; and to the last of them.
	TimeToUpgraded     distribution `json:"timeToUpgraded"`
	AllUpgradedSeconds float64      `json:"allUpgradedSeconds"`
	// Until no request has been made for 15 s.
	Seconds       float64 `json:"seconds"`
	Requests      counts  `json:"requests"`
	Total         int64   `json:"total"`
	Writes        int64   `json:"writes"`
	RequestsPerCR float64 `json:"requestsPerCR"`
	WritesPerCR   float64 `json:"writesPerCR"`
	CPUSeconds    float64 `json:"cpuSeconds"`
	PeakRSSMiB    float64 `json:"peakRSSMiB"`
	// The control plane's CPU seconds over the same window, by component
	// and in total, and the harness's own (not in the total).
	ControlPlaneCPUSeconds map[string]float64 `json:"controlPlaneCPUSeconds"`
	// Deployments whose generation moved: their pods were replaced.
	DeploymentsRolled int `json:"deploymentsRolled"`
	// ModelServers whose Ready condition was not True at some time during
	// the upgrade (none for the peer, which has no Ready condition).
	LeftReady int `json:"leftReady"`
}

// buildNext builds the operator and the peer of the next release from a
// copy of the tree at repo, and returns them with the chart version they
// carry.
func buildNext(repo, dir string) (manager, peer, version string, err error) {
	ch, err := helmcharts.ModelServer()
	if err != nil {
		return "", "", "", err
	}
	if version, err = nextPatch(ch.Metadata.Version); err != nil {
		return "", "", "", err
	}
	src := filepath.Join(dir, "next")
	if err := nextchart.CopyTree(repo, src); err != nil {
		return "", "", "", err
	}
	if err := nextchart.Change(src, ch.Metadata.Version, version); err != nil {
		return "", "", "", err
	}
	manager, peer, err = buildBinaries(src, filepath.Join(dir, "next-bin"))
	return manager, peer, version, err
}

// nextPatch is version with its patch number one higher: 0.1.0 → 0.1.1.
func nextPatch(version string) (string, error) {
	parts := strings.Split(version, ".")
	patch, err := strconv.Atoi(parts[len(parts)-1])
	if len(parts) != 3 || err != nil {
		return "", fmt.Errorf("chart version %q is not major.minor.patch", version)
	}
	parts[2] = strconv.Itoa(patch + 1)
	return strings.Join(parts, "."), nil
}

// upgrade stops op and starts next in its place (with the same arguments,
// in the same cgroup), and measures until every release is upgraded and the requests
// have stopped (timeout at most). It returns the new process, running.
func upgrade(ctx context.Context, l *launcher, op *localcluster.Process, next *nextBuild,
	cs kubernetes.Interface, tr *tracker, n int, timeout time.Duration, log *slog.Logger) (*upgradeWindow, *localcluster.Process, error) {
	log.Info("upgrading the operator", "chartVersion", next.version)
	w, proc, err := measureUpgrade(ctx, l, op, next, cs, tr, n, timeout)
	if err != nil {
		if proc != nil {
			proc.Stop(30 * time.Second)
		}
		return nil, nil, err
	}
	log.Info("upgraded", "upgraded", w.Upgraded, "allUpgraded", w.AllUpgradedSeconds, "quietAfter", w.Seconds,
		"requests", w.Total, "writes", w.Writes, "deploymentsRolled", w.DeploymentsRolled, "leftReady", w.LeftReady)
	return &w, proc, nil
}

func measureUpgrade(ctx context.Context, l *launcher, op *localcluster.Process, next *nextBuild,
	cs kubernetes.Interface, tr *tracker, n int, timeout time.Duration) (upgradeWindow, *localcluster.Process, error) {
	version := next.version
	w := upgradeWindow{ChartVersion: version}
	l.binary = next.binary
	gens, err := deploymentGenerations(ctx, cs)
	if err != nil {
		return w, nil, err
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	tr.startUpgrade()
	tr.watchUpgradedServices(watchCtx, cs, version)

	op.Stop(30 * time.Second)
	meter := newCPUMeter(l.c)
	before := l.requests.Snapshot()
	start := time.Now()
	proc, err := l.start(ctx, l.name+"-upgraded")
	if err != nil {
		return w, nil, err
	}
	quiet := untilQuiet(ctx, l.requests, before, start, timeout)
	w.ControlPlaneCPUSeconds = meter.used()
	if !running(proc) {
		return w, proc, l.exited(proc, "exited during the upgrade")
	}
	w.Seconds, w.Requests, w.Total, w.Writes = quiet.Seconds, quiet.Requests, quiet.Total, quiet.Writes
	w.RequestsPerCR, w.WritesPerCR = round(float64(w.Total)/float64(n)), round(float64(w.Writes)/float64(n))

	times := tr.after(tr.upgraded, start)
	w.Upgraded, w.TimeToUpgraded = len(times), distributionOf(times)
	w.AllUpgradedSeconds = w.TimeToUpgraded.Max
	w.LeftReady = tr.lostReadyCount()
	after, err := deploymentGenerations(ctx, cs)
	if err != nil {
		return w, proc, err
	}
	for name, g := range gens {
		if after[name] != g {
			w.DeploymentsRolled++
		}
	}
	if w.CPUSeconds, err = machine.ProcessCPUSeconds(proc.Pid()); err != nil {
		return w, proc, err
	}
	rss, err := peakRSSMiB(proc.Pid())
	w.CPUSeconds, w.PeakRSSMiB = round(w.CPUSeconds), round(rss)
	return w, proc, err
}

// deploymentGenerations maps each ModelServer of the run to its
// Deployment's generation, which moves when its pod template does.
func deploymentGenerations(ctx context.Context, cs kubernetes.Interface) (map[string]int64, error) {
	list, err := cs.AppsV1().Deployments(benchNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	gens := make(map[string]int64, len(list.Items))
	for _, d := range list.Items {
		gens[d.Labels[instanceLabel]] = d.Generation
	}
	return gens, nil
}

// watchUpgradedServices records in t.upgraded the first time each
// ModelServer's Service carries the chart version the upgrade brings.
func (t *tracker) watchUpgradedServices(ctx context.Context, cs kubernetes.Interface, version string) {
	upgraded := t.upgraded
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(benchNamespace))
	inf := f.Core().V1().Services().Informer()
	on := func(obj any) {
		if svc, ok := obj.(*corev1.Service); ok && svc.Annotations[nextchart.VersionAnnotation] == version {
			t.record(upgraded, svc.Name)
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: on, UpdateFunc: func(_, obj any) { on(obj) }})
	f.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
}
