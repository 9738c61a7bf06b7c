package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
	"github.com/modelserver-dev/modelserver-operator/test/machine"
)

// benchNamespace holds every ModelServer of a run.
const benchNamespace = "bench"

// operatorRun is what one operator achieved at one N.
type operatorRun struct {
	Name string   `json:"name"`
	Args []string `json:"args"`
	// ReadyMeans says what Ready is for this operator.
	ReadyMeans string `json:"readyMeans"`

	// Per ModelServer, seconds from its create request.
	Deployed distribution `json:"timeToDeployed"`
	Ready    distribution `json:"timeToReady"`
	// For an operator with a Ready condition of its own: per ModelServer,
	// seconds from its Deployment having all its pods ready to its Ready
	// condition, the time the operator itself adds.
	ReadyAfterServing *distribution `json:"readyAfterServing,omitempty"`
	// The same from the later of that and its fetch pod's exit (kwok's
	// finishedAt, which counts whole seconds, so up to 1 s too long when
	// the fetch ended last): what is left once the cluster has done both.
	ReadyAfterFetchAndServing *distribution `json:"readyAfterFetchAndServing,omitempty"`
	// How many fetch pods exited after their ModelServer's pods were
	// ready (to the second).
	FetchEndedLast *int `json:"fetchEndedAfterServing,omitempty"`
	// From the first create request to the last ModelServer reaching it.
	AllDeployedSeconds float64 `json:"allDeployedSeconds"`
	AllReadySeconds    float64 `json:"allReadySeconds"`
	// For an operator with a Ready condition of its own, from the first
	// create request until the cluster had done its part for every
	// ModelServer: until the last Deployment had all its pods ready (the
	// floor's Ready), and until the last of those and the fetch pods'
	// exits (kwok's finishedAt, whole seconds). Ours' Ready waits for
	// both; kwok, unlike a real node, readies serving pods whose model is
	// still being fetched.
	AllServedSeconds           float64 `json:"allServedSeconds,omitempty"`
	AllServedAndFetchedSeconds float64 `json:"allServedAndFetchedSeconds,omitempty"`
	Complete                   bool    `json:"complete"`

	// API requests from the operator's start until all were Ready.
	Requests      counts  `json:"requests"`
	RequestsTotal int64   `json:"requestsTotal"`
	RequestsPerCR float64 `json:"requestsPerCR"`
	WritesTotal   int64   `json:"writesTotal"`
	WritesPerCR   float64 `json:"writesPerCR"`
	// The ModelServers' status writes until all were Ready, by the
	// step each made ("Fetching → Ready"), and a few messages of each
	// write that stayed in its phase.
	StatusSteps        counts              `json:"statusWritesByStep,omitempty"`
	StatusStepExamples map[string][]string `json:"statusWriteExamples,omitempty"`
	CPUSeconds         float64             `json:"cpuSeconds"`
	// The control plane's CPU seconds from the first create until all
	// were Ready, by component, and the harness's own (not in "total").
	ControlPlaneCPUSeconds map[string]float64 `json:"controlPlaneCPUSeconds"`
	// The control plane's processes' peak RSS, once all were Ready, and
	// what the ModelServers left in etcd.
	ControlPlanePeakRSSMiB map[string]float64 `json:"controlPlanePeakRSSMiB,omitempty"`
	Etcd                   *storage           `json:"etcd,omitempty"`
	PeakRSSMiB             float64            `json:"peakRSSMiB"`
	// With a memory limit (-ours-memory-max): the limit of the cgroup the
	// operator ran in, the most memory charged to it there until all were
	// Ready (the process's anonymous memory, and the kernel's on its
	// behalf, but not the pages of its binary, which the harness's build
	// put in the page cache), and how many times the kernel killed it for
	// passing the limit.
	MemoryMaxMiB        float64 `json:"memoryMaxMiB,omitempty"`
	MemoryPeakChargeMiB float64 `json:"memoryPeakChargeMiB,omitempty"`
	OOMKills            int     `json:"oomKills,omitempty"`
	// With a CPU limit (-operator-cpus, -ours-cpus): the CPU limit of the
	// cgroup the operator ran in, in CPUs, and until all were Ready the
	// 100 ms periods in which it ran, those in which it used up its quota
	// and waited, and the time it waited.
	CPUMax              float64 `json:"cpuMax,omitempty"`
	CPUPeriods          int64   `json:"cpuPeriods,omitempty"`
	CPUThrottledPeriods int64   `json:"cpuThrottledPeriods,omitempty"`
	CPUThrottledSeconds float64 `json:"cpuThrottledSeconds,omitempty"`
	ReleaseSecrets      int     `json:"releaseSecrets"`
	ReleaseBytesPerCR   float64 `json:"releaseSecretBytesPerCR"`

	Resync  resyncWindow   `json:"resync"`
	Idle    idleWindow     `json:"idle"`
	Upgrade *upgradeWindow `json:"upgrade,omitempty"`
	Update  *updateWindow  `json:"update,omitempty"`
	Delete  *deleteWindow  `json:"delete,omitempty"`

	LoadAverage [2]float64 `json:"loadAverage1mStartEnd"`

	readySeconds []float64
}

// resyncWindow is a restart of the operator with every ModelServer Ready:
// a full resync from scratch, until no request has been made for a while.
type resyncWindow struct {
	Seconds  float64 `json:"seconds"`
	Requests counts  `json:"requests"`
	Total    int64   `json:"total"`
	Writes   int64   `json:"writes"`
}

// idleWindow follows the resync: nothing changes, so nothing should be
// asked of the apiserver.
type idleWindow struct {
	Seconds               float64 `json:"seconds"`
	Requests              counts  `json:"requests"`
	Total                 int64   `json:"total"`
	Writes                int64   `json:"writes"`
	RequestsPerMinute     float64 `json:"requestsPerMinute"`
	RequestsPerCRPer10Min float64 `json:"requestsPerCRPer10Min"`
	CPUSeconds            float64 `json:"cpuSeconds"`
	CPUPercentOfCore      float64 `json:"cpuPercentOfCore"`
}

// operatorSpec says how to run one operator.
type operatorSpec struct {
	name   string
	binary string
	args   []string
	// limits, where not zero, run the operator in a cgroup with them, as a
	// container with those limits runs it.
	limits machine.Limits
	// readyFromDeployment: the operator has no Ready condition; Ready is
	// its Deployment's ready replicas reaching the desired count.
	readyFromDeployment bool
	openStatus          bool
	// next, if set, is the next release's build of this operator, which
	// replaces it after the idle window (-upgrade).
	next *nextBuild
}

// nextBuild is an operator's binary built from the next release's tree.
type nextBuild struct {
	binary, version string
}

// withKubeconfig puts --kubeconfig into an operator's arguments: after the
// subcommand, if there is one, since the flags that follow a positional
// argument are not parsed.
func withKubeconfig(kubeconfig string, args []string) []string {
	flag := "--kubeconfig=" + kubeconfig
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return append([]string{args[0], flag}, args[1:]...)
	}
	return append([]string{flag}, args...)
}

// readStorage reads what the ModelServers left in the cluster's storage:
// Helm's release records, and everything in etcd since base.
func (res *operatorRun) readStorage(ctx context.Context, cs kubernetes.Interface, store etcdStore, base liveUse, n int) error {
	var err error
	res.ReleaseSecrets, res.ReleaseBytesPerCR, err = releaseSecretBytes(ctx, cs, n)
	if err != nil {
		return err
	}
	etcd, err := store.since(ctx, base, n)
	res.Etcd = &etcd
	return err
}

func runOperator(ctx context.Context, cfg config, spec operatorSpec, n int, log *slog.Logger) (*operatorRun, error) {
	log = log.With("operator", spec.name, "n", n)
	res := &operatorRun{Name: spec.name, Args: spec.args, ReadyMeans: "the ModelServer's Ready condition is True"}
	if spec.readyFromDeployment {
		res.ReadyMeans = "its Deployment's readyReplicas reach spec.replicas (the peer has no Ready condition)"
	}
	res.LoadAverage[0] = loadAverage()

	c, err := startCluster(ctx, cfg, n, log)
	if err != nil {
		return nil, err
	}
	defer c.Stop()
	admin, cs, dyn, err := prepareCluster(ctx, cfg, c, spec.openStatus, log)
	if err != nil {
		return nil, err
	}
	requests, err := openRequestLog(c.AuditLog, operatorUser)
	if err != nil {
		return nil, err
	}
	defer requests.Close()
	kubeconfig, err := c.UserKubeconfig(operatorUser, "system:masters")
	if err != nil {
		return nil, err
	}
	args := withKubeconfig(kubeconfig, spec.args)
	var cg *machine.Cgroup // nil: no limits
	if spec.limits != (machine.Limits{}) {
		if cg, err = machine.NewCgroup(spec.limits); err != nil {
			return nil, fmt.Errorf("a cgroup for %s (needs root; -operator-cpus=0 without -ours-memory-max runs the operators as bare processes): %w", spec.name, err)
		}
		// Empty once the cluster has stopped the operator.
		defer func() {
			c.Stop()
			_ = cg.RemoveWhenEmpty(5 * time.Second)
		}()
		res.MemoryMaxMiB = round(float64(spec.limits.MemoryBytes) / (1 << 20))
		res.CPUMax = spec.limits.CPUs
	}
	l := &launcher{c: c, requests: requests, cg: cg, name: spec.name, binary: spec.binary, args: args}
	op, err := l.start(ctx, spec.name)
	if err != nil {
		return nil, err
	}

	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	tr := newTracker()
	tr.watch(watchCtx, dyn, cs, benchNamespace)

	store := newEtcdStore(c.EtcdURL)
	storeBase, err := store.baseline(ctx)
	if err != nil {
		return nil, err
	}
	// Create the ModelServers.
	log.Info("creating ModelServers")
	meter := newCPUMeter(c)
	t0 := time.Now()
	if err := createModelServers(ctx, dyn, n, cfg.createParallelism, tr); err != nil {
		return nil, err
	}
	readyMap := tr.ready
	if spec.readyFromDeployment {
		readyMap = tr.served
	}
	res.Complete = waitForAll(ctx, tr, readyMap, op, n, cfg.readyTimeout, t0, log)
	if !running(op) {
		return nil, l.exited(op, "exited")
	}
	res.ControlPlaneCPUSeconds = meter.used()
	res.ControlPlanePeakRSSMiB = controlPlanePeakRSSMiB(c)
	deployed, lastDeployed := tr.since(tr.deployed)
	ready, lastReady := tr.since(readyMap)
	res.Deployed, res.Ready = distributionOf(deployed), distributionOf(ready)
	if !spec.readyFromDeployment {
		if err := res.readLags(ctx, tr, cs, t0); err != nil {
			return nil, err
		}
	}
	res.AllDeployedSeconds = round(lastDeployed.Sub(t0).Seconds())
	res.AllReadySeconds = round(lastReady.Sub(t0).Seconds())
	res.readySeconds = seconds(ready)
	res.Requests = requests.Snapshot()
	res.RequestsTotal, res.WritesTotal = res.Requests.Total(), res.Requests.Writes()
	res.RequestsPerCR = round(float64(res.RequestsTotal) / float64(n))
	res.WritesPerCR = round(float64(res.WritesTotal) / float64(n))
	res.StatusSteps, res.StatusStepExamples = tr.stepCounts()
	if res.CPUSeconds, err = machine.ProcessCPUSeconds(op.Pid()); err != nil {
		return nil, err
	}
	if res.PeakRSSMiB, err = peakRSSMiB(op.Pid()); err != nil {
		return nil, err
	}
	res.PeakRSSMiB = round(res.PeakRSSMiB)
	if cg != nil {
		if err := res.readCgroup(cg); err != nil {
			return nil, err
		}
	}
	if err := res.readStorage(ctx, cs, store, storeBase, n); err != nil {
		return nil, err
	}
	log.Info("all ready", "complete", res.Complete, "allDeployed", res.AllDeployedSeconds, "allReady", res.AllReadySeconds,
		"requests", res.RequestsTotal, "writes", res.WritesTotal, "statusWritesByStep", res.StatusSteps, "readyAfterServing", res.ReadyAfterServing, "controlPlaneCPU", res.ControlPlaneCPUSeconds)

	// A forced full resync: restart the operator; it reads everything
	// again and reconciles every ModelServer.
	op.Stop(30 * time.Second)
	before := requests.Snapshot()
	rs := time.Now()
	if op, err = l.start(ctx, spec.name+"-restarted"); err != nil {
		return nil, err
	}
	res.Resync = untilQuiet(ctx, requests, before, rs, 5*time.Minute)
	log.Info("resynced", "seconds", res.Resync.Seconds, "requests", res.Resync.Total, "writes", res.Resync.Writes)

	// The idle window.
	log.Info("idle window", "duration", cfg.idle)
	if res.Idle, err = idleFor(ctx, requests, op.Pid(), cfg.idle, n); err != nil {
		return nil, err
	}
	// The peak RSS is the larger of both processes'.
	if rss, err := peakRSSMiB(op.Pid()); err == nil && rss > res.PeakRSSMiB {
		res.PeakRSSMiB = round(rss)
	}
	res.LoadAverage[1] = loadAverage()
	log.Info("idle", "requests", res.Idle.Total, "writes", res.Idle.Writes, "cpuPercent", res.Idle.CPUPercentOfCore)
	if op, err = cfg.runLaterWindows(ctx, res, spec, l, op, admin, cs, dyn, tr, n, log); err != nil {
		return nil, err
	}
	op.Stop(30 * time.Second)
	return res, nil
}

// runLaterWindows runs, after the idle window, those the flags ask for:
// the upgrade, the model update, the delete. It returns the operator's
// process, the upgrade's if there was one.
func (cfg config) runLaterWindows(ctx context.Context, res *operatorRun, spec operatorSpec, l *launcher, op *localcluster.Process,
	admin *rest.Config, cs kubernetes.Interface, dyn dynamic.Interface, tr *tracker, n int, log *slog.Logger) (*localcluster.Process, error) {
	var err error
	if spec.next != nil {
		if res.Upgrade, op, err = upgrade(ctx, l, op, spec.next, cs, tr, n, cfg.readyTimeout, log); err != nil {
			return op, err
		}
	}
	u := updating{c: l.c, cs: cs, dyn: dyn, tr: tr, op: op, requests: l.requests, readyCondition: !spec.readyFromDeployment}
	if res.Update, err = cfg.runUpdateWindow(ctx, u, n, cfg.createParallelism, log); err != nil {
		return op, err
	}
	d := deletion{c: l.c, admin: admin, dyn: dyn, tr: tr, op: op, requests: l.requests, records: true}
	res.Delete, err = cfg.runDeleteWindow(ctx, d, n, log)
	return op, err
}

// waitForAll waits until the n ModelServers are Deployed and in readyMap,
// or op has stopped, logging progress every 10 s; it returns whether all
// are, with op still running.
func waitForAll(ctx context.Context, tr *tracker, readyMap map[string]time.Time, op *localcluster.Process, n int,
	timeout time.Duration, t0 time.Time, log *slog.Logger) bool {
	lastLog := time.Now()
	return tr.wait(ctx, timeout, func() bool {
		if !running(op) {
			return true
		}
		d, r := tr.count(tr.deployed), tr.count(readyMap)
		if time.Since(lastLog) > 10*time.Second {
			log.Info("progress", "deployed", d, "ready", r, "elapsed", time.Since(t0).Round(time.Second))
			lastLog = time.Now()
		}
		return d == n && r == n
	}) && running(op)
}

// launcher starts the operator's process.
type launcher struct {
	c        *localcluster.Cluster
	requests *requestLog
	// cg, if not nil, is the cgroup each process starts in.
	cg           *machine.Cgroup
	name, binary string
	args         []string
}

// start starts the operator as name and returns once its ModelServer
// informer is watching.
func (l *launcher) start(ctx context.Context, name string) (*localcluster.Process, error) {
	binary, args := l.binary, l.args
	if l.cg != nil {
		binary, args = l.cg.Wrap(binary, args)
	}
	p, err := l.c.StartProcess(name, binary, args, nil)
	if err != nil {
		return nil, err
	}
	ok := waitUntil(ctx, 2*time.Minute, func() bool {
		return l.requests.Snapshot()["watch modelservers"] > 0 || !running(p)
	})
	if !ok || !running(p) {
		return nil, l.exited(p, "did not start")
	}
	return p, nil
}

// exited says why the operator stopped before its time.
func (l *launcher) exited(p *localcluster.Process, what string) error {
	if l.cg != nil {
		if kills, _ := l.cg.OOMKills(); kills > 0 {
			what += fmt.Sprintf(", killed for passing its cgroup's memory limit (%d OOM kills)", kills)
		}
	}
	return fmt.Errorf("%s %s; log:\n%s", l.name, what, logTail(p.LogFile()))
}

// readLags records how long after its pods were ready, and after the later
// of that and its fetch pod's exit, each ModelServer was Ready; and when,
// from t0, the last of them had its pods ready, and had both.
func (res *operatorRun) readLags(ctx context.Context, tr *tracker, cs kubernetes.Interface, t0 time.Time) error {
	lag := distributionOf(tr.between(tr.served, tr.ready))
	res.ReadyAfterServing = &lag
	ends, err := fetchEnds(ctx, cs, benchNamespace)
	if err != nil {
		return err
	}
	lagBoth, fetchLast := tr.afterBoth(ends)
	both := distributionOf(lagBoth)
	res.ReadyAfterFetchAndServing, res.FetchEndedLast = &both, &fetchLast
	_, lastServed := tr.since(tr.served)
	res.AllServedSeconds = round(lastServed.Sub(t0).Seconds())
	if last := tr.lastOfBoth(ends); !last.IsZero() {
		res.AllServedAndFetchedSeconds = round(last.Sub(t0).Seconds())
	}
	return nil
}

// readCgroup records what the cgroup the operator ran in says of its
// memory and CPU; zero for a resource it did not limit.
func (res *operatorRun) readCgroup(cg *machine.Cgroup) error {
	kills, err := cg.OOMKills()
	if err != nil {
		return err
	}
	charged, err := cg.PeakBytes()
	if err != nil {
		return err
	}
	t, err := cg.CPUThrottling()
	if err != nil {
		return err
	}
	res.OOMKills, res.MemoryPeakChargeMiB = kills, round(float64(charged)/(1<<20))
	res.CPUPeriods, res.CPUThrottledPeriods, res.CPUThrottledSeconds = t.Periods, t.Throttled, round(t.Waited)
	return nil
}

// untilQuiet waits until the operator's requests have stopped for
// 15 s (limit at most) and returns those made since before, started at
// start.
func untilQuiet(ctx context.Context, requests *requestLog, before counts, start time.Time, limit time.Duration) resyncWindow {
	quietFor := 15 * time.Second
	lastTotal, lastChange := int64(-1), time.Now()
	waitUntil(ctx, limit, func() bool {
		if total := requests.Snapshot().Total(); total != lastTotal {
			lastTotal, lastChange = total, time.Now()
		}
		return time.Since(lastChange) >= quietFor
	})
	w := resyncWindow{Requests: requests.Snapshot().Sub(before), Seconds: round(lastChange.Sub(start).Seconds())}
	w.Total, w.Writes = w.Requests.Total(), w.Requests.Writes()
	return w
}

// operatorMeter measures an operator over a window: its requests, from the
// audit log, and its process's CPU.
type operatorMeter struct {
	op       *localcluster.Process
	requests *requestLog
	before   counts
	cpu0     float64
}

// meterOperator starts measuring op, whose requests are in requests; a nil
// op (the floor) gives a nil meter.
func meterOperator(op *localcluster.Process, requests *requestLog) (*operatorMeter, error) {
	if op == nil {
		return nil, nil
	}
	cpu0, err := machine.ProcessCPUSeconds(op.Pid())
	return &operatorMeter{op: op, requests: requests, before: requests.Snapshot(), cpu0: cpu0}, err
}

// untilQuiet waits, up to limit, until the operator has made no request
// for 15 s, and returns its requests since the meter started (their
// seconds from start to the last) and the CPU it used.
func (m *operatorMeter) untilQuiet(ctx context.Context, start time.Time, limit time.Duration) (resyncWindow, float64, error) {
	quiet := untilQuiet(ctx, m.requests, m.before, start, limit)
	cpu1, err := machine.ProcessCPUSeconds(m.op.Pid())
	return quiet, round(cpu1 - m.cpu0), err
}

// operatorLoad is what an operator asked of the apiserver over a window:
// its requests until it had made none for 15 s, the seconds from the
// window's start to the last of them, and its CPU seconds until then.
type operatorLoad struct {
	QuietAfterSeconds float64 `json:"quietAfterSeconds,omitempty"`
	Requests          counts  `json:"requests,omitempty"`
	Total             int64   `json:"total"`
	Writes            int64   `json:"writes"`
	RequestsPerCR     float64 `json:"requestsPerCR"`
	WritesPerCR       float64 `json:"writesPerCR"`
	CPUSeconds        float64 `json:"cpuSeconds"`
}

// measure waits until m's operator is quiet and fills l in, per CR of n.
func (l *operatorLoad) measure(ctx context.Context, m *operatorMeter, start time.Time, limit time.Duration, n int) error {
	quiet, cpu, err := m.untilQuiet(ctx, start, limit)
	l.Requests, l.Total, l.Writes, l.CPUSeconds = quiet.Requests, quiet.Total, quiet.Writes, cpu
	if l.Total > 0 {
		l.QuietAfterSeconds = quiet.Seconds
	}
	l.perCROf(n)
	return err
}

// perCROf sets the requests and writes per CR of n from the totals.
func (l *operatorLoad) perCROf(n int) {
	l.RequestsPerCR, l.WritesPerCR = round(float64(l.Total)/float64(n)), round(float64(l.Writes)/float64(n))
}

// idleFor counts the operator's requests and the CPU of its process
// pid for d, with nothing changing in the cluster of n ModelServers.
func idleFor(ctx context.Context, requests *requestLog, pid int, d time.Duration, n int) (idleWindow, error) {
	var w idleWindow
	start := requests.Snapshot()
	cpu0, err := machine.ProcessCPUSeconds(pid)
	if err != nil {
		return w, err
	}
	t1 := time.Now()
	select {
	case <-ctx.Done():
		return w, ctx.Err()
	case <-time.After(d):
	}
	elapsed := time.Since(t1)
	cpu1, err := machine.ProcessCPUSeconds(pid)
	if err != nil {
		return w, err
	}
	w.Seconds = round(elapsed.Seconds())
	w.Requests = requests.Snapshot().Sub(start)
	w.Total, w.Writes = w.Requests.Total(), w.Requests.Writes()
	w.RequestsPerMinute = round(float64(w.Total) / elapsed.Minutes())
	w.RequestsPerCRPer10Min = round(float64(w.Total) / float64(n) / elapsed.Minutes() * 10)
	w.CPUSeconds = round(cpu1 - cpu0)
	w.CPUPercentOfCore = round(100 * (cpu1 - cpu0) / elapsed.Seconds())
	return w, nil
}

// createModelServers creates bench-0000 … with parallel workers, each
// with one replica and a model whose fetch Job completes at once (kwok
// completes the Job's pod).
func createModelServers(ctx context.Context, dyn dynamic.Interface, n, parallelism int, tr *tracker) error {
	modelServers := benchModelServers(dyn)
	return forEach(ctx, n, parallelism, func(ctx context.Context, i int) error {
		name := crName(i)
		at := time.Now()
		if _, err := modelServers.Create(ctx, modelServer(name), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create ModelServer %s: %w", name, err)
		}
		tr.setCreated(name, at)
		return nil
	})
}

func crName(i int) string { return fmt.Sprintf("bench-%04d", i) }

func modelServer(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": servingv1alpha1.GroupVersion.String(),
		"kind":       "ModelServer",
		"metadata":   map[string]any{"name": name, "namespace": benchNamespace},
		"spec": map[string]any{
			"model":    map[string]any{"storageUri": "s3://models/" + name},
			"replicas": int64(1),
		},
	}}
}

// releaseSecretBytes sums the data of the Helm release records.
func releaseSecretBytes(ctx context.Context, cs kubernetes.Interface, n int) (int, float64, error) {
	secrets, err := cs.CoreV1().Secrets(benchNamespace).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
	if err != nil {
		return 0, 0, err
	}
	total := 0
	for _, s := range secrets.Items {
		total += secretSize(&s)
	}
	return len(secrets.Items), round(float64(total) / float64(n)), nil
}

func secretSize(s *corev1.Secret) int {
	size := 0
	for k, v := range s.Data {
		size += len(k) + len(v)
	}
	for k, v := range s.Labels {
		size += len(k) + len(v)
	}
	return size
}

func running(p *localcluster.Process) bool {
	select {
	case <-p.Exited():
		return false
	default:
		return true
	}
}

func waitUntil(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(250 * time.Millisecond)
	}
	return true
}

// logTail is the end of a log, for an error to show.
func logTail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-30):], "\n")
}
