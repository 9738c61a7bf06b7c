package alerts

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/metrics"
	"github.com/modelserver-dev/modelserver-operator/internal/status"
)

// TestMain runs the tests, then fails unless every alert fired in one of
// them: an alert no test can make fire is a rule that cannot. Not when
// -run or -skip leaves tests out.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 && flag.Lookup("test.run").Value.String() == "" && flag.Lookup("test.skip").Value.String() == "" {
		if missing := neverFired(); len(missing) > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: alerts no test made fire: %s\n", strings.Join(missing, ", "))
			code = 1
		}
	}
	os.Exit(code)
}

func neverFired() []string {
	var missing []string
	for _, name := range alertNames() {
		if fired[name] == 0 {
			missing = append(missing, name)
		}
	}
	return missing
}

func alertNames() []string {
	raw, err := os.ReadFile("../../config/prometheus/alerts.yaml")
	if err != nil {
		panic(err)
	}
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^\s*- alert: (\S+)$`).FindAllSubmatch(raw, -1) {
		names = append(names, string(m[1]))
	}
	return names
}

// Every alert says how bad it is, what happened and where to read what to
// do, in a section of docs/alerts.md of its own.
func TestEveryAlertHasASeverityASummaryAndARunbook(t *testing.T) {
	groups := ruleFile(t)
	doc, err := os.ReadFile("../../docs/alerts.md")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
			}
			for _, a := range []string{"summary", "description"} {
				if r.Annotations[a] == "" {
					t.Errorf("%s has no %s", r.Alert, a)
				}
			}
			want := "https://github.com/modelserver-dev/modelserver-operator/blob/main/docs/alerts.md#" + strings.ToLower(r.Alert)
			if got := r.Annotations["runbook_url"]; got != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, got, want)
			}
			if !strings.Contains(string(doc), "\n## "+r.Alert+"\n") {
				t.Errorf("docs/alerts.md has no section ## %s", r.Alert)
			}
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^## (ModelServer\S*)$`).FindAllSubmatch(doc, -1) {
		if !slices.Contains(names, string(m[1])) {
			t.Errorf("docs/alerts.md tells of %s, which no rule has", m[1])
		}
	}
	if !slices.Equal(names, alertNames()) {
		t.Errorf("the alerts found by their names %v differ from the rules %v", alertNames(), names)
	}
}

// Every series a rule selects is one the operator writes, with the labels
// and label values the operator gives it: a metric renamed, or a cause,
// phase or problem misspelt, would leave an alert that never fires.
func TestTheRulesSelectSeriesTheOperatorWrites(t *testing.T) {
	labelsOf := servedLabels(t)
	values := map[string][]string{
		"phase":      metrics.Phases,
		"problem":    {metrics.ProblemStalledRollout, metrics.ProblemStalledFetch, metrics.ProblemSlowFetch, metrics.ProblemInactiveAutoscaler, metrics.ProblemAutoscalerAtMaximum, metrics.ProblemFailedRefresh},
		"cause":      slices.Concat(status.Causes, metrics.FetchCauses, status.SlowFetchCauses, status.AutoscalerCauses),
		"reason":     {servingv1alpha1.ReasonPodsNotReady},
		"controller": {"modelserver"},
		"job":        {"modelserver-controller-manager-metrics-service"},
		"status":     slices.Concat(grpcCodes, []string{"success", "fail"}),
		"API":        {"", "predict", "classify", "regress", "multi_inference"},
	}
	for _, g := range ruleFile(t).Groups {
		for _, r := range g.Rules {
			for _, vs := range selectors(t, r.Expr) {
				have, known := seriesLabels(labelsOf, vs.Name)
				if !known {
					t.Errorf("%s selects %s, which the operator does not serve", r.Alert, vs.Name)
					continue
				}
				for _, problem := range matcherProblems(vs, have, values) {
					t.Errorf("%s %s", r.Alert, problem)
				}
			}
		}
	}
}

// matcherProblems say which of a selector's matchers select by a label
// its series do not have (have), or by a value the operator never gives
// that label (values).
func matcherProblems(vs *parser.VectorSelector, have []string, values map[string][]string) []string {
	var out []string
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel {
			continue
		}
		want, checked := values[m.Name]
		switch {
		case !slices.Contains(have, m.Name):
			out = append(out, fmt.Sprintf("selects %s by %s, a label it does not have (it has %v)", vs.Name, m.Name, have))
		case !checked:
			out = append(out, fmt.Sprintf("selects by %s, whose values this test does not know", m.Name))
		default:
			for _, v := range strings.Split(m.Value, "|") {
				if !slices.Contains(want, v) {
					out = append(out, fmt.Sprintf("selects %s{%s}: %q is no value the operator gives it (%v)", vs.Name, m, v, want))
				}
			}
		}
	}
	return out
}

// servedLabels are the names of the labels of every family the operator
// serves, and of the up series Prometheus writes of its target.
func servedLabels(t *testing.T) map[string][]string {
	t.Helper()
	// One series of each of the operator's vectors, so that the registry
	// gives every family's labels.
	uid := types.UID("labels")
	metrics.Observe(metrics.Seen{UID: uid, Namespace: "labels", Name: "labels", Generation: 1, Phase: "Deploying", Reason: "PodsNotReady", P99Latency: time.Second, Availability: 0.999, PausedSince: time.Now()})
	metrics.Stalled(uid, status.CauseImagePull)
	metrics.AutoscalerAtMaximum(uid, true)
	metrics.FetchEnded(uid, "labels", "", time.Second, 1, 1)
	metrics.HelmOperation("install", metrics.ResultSuccess, time.Second)
	defer metrics.Forget(uid)
	startController(t, "labels", func(reconcile.Request) error { return nil })("one")

	// A reconcile's time is the last a controller's first reconcile
	// records.
	fams := gatherUntil(t, "controller_runtime_reconcile_time_seconds")
	// Prometheus labels every series with its target's labels, which the
	// series' own win over.
	target := []string{"job", "namespace", "pod", "instance", "service", "endpoint"}
	out := map[string][]string{"up": target}
	for name, labels := range tfServingMetrics {
		out[name] = slices.Concat(labels, target)
	}
	for _, f := range fams {
		if out[f.GetName()] == nil {
			out[f.GetName()] = slices.Clone(target)
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if !slices.Contains(out[f.GetName()], l.GetName()) {
					out[f.GetName()] = append(out[f.GetName()], l.GetName())
				}
			}
		}
	}
	return out
}

// tfServingMetrics are the metrics of TF Serving (2.19) the rules and the
// dashboard read,
// with their labels: TF's metric names with each "/" turned into ":", as
// its Prometheus endpoint exports them (test/tfservingdouble exports the
// same, and the real-node suite scrapes them through a ModelServer's
// ServiceMonitor).
var tfServingMetrics = map[string][]string{
	":tensorflow:serving:request_count":             {"model_name", "status"},
	":tensorflow:cc:saved_model:load_attempt_count": {"model_path", "status"},
	":tensorflow:serving:request_latency":           {"model_name", "API", "entrypoint"},
}

// grpcCodes are the status codes of TF Serving's requests, gRPC's.
var grpcCodes = []string{"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
	"PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL",
	"UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}

// gatherUntil gathers the registry once it has the family name (a
// controller counts its reconciles from its start), or after 10 seconds.
func gatherUntil(t *testing.T, name string) []*dto.MetricFamily {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		fams, err := ctrlmetrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(fams, func(f *dto.MetricFamily) bool { return f.GetName() == name }) || time.Now().After(deadline) {
			return fams
		}
	}
}

// selectors are the vector selectors of a PromQL expression.
func selectors(t *testing.T, expr string) []*parser.VectorSelector {
	t.Helper()
	e, err := promParser.ParseExpr(expr)
	if err != nil {
		t.Fatal(err)
	}
	var out []*parser.VectorSelector
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			out = append(out, vs)
		}
		return nil
	})
	return out
}

var (
	// ml is where the tests' ModelServers are; uids keeps their UIDs
	// apart across tests.
	ml     = "ml-team"
	uidSeq atomic.Int64
)

// modelServer is one ModelServer as the operator's metrics code sees it.
type modelServer struct {
	metrics.Seen
}

func newModelServer(t *testing.T, name string) *modelServer {
	ms := &modelServer{metrics.Seen{UID: types.UID(fmt.Sprint("uid-", uidSeq.Add(1))), Namespace: ml, Name: name, Generation: 1}}
	t.Cleanup(func() { metrics.Forget(ms.UID) })
	return ms
}

// is records the phase and reason a reconcile wrote.
func (ms *modelServer) is(phase servingv1alpha1.Phase, reason string) {
	ms.Phase, ms.Reason, ms.Ready = string(phase), reason, phase == servingv1alpha1.PhaseReady
	metrics.Observe(ms.Seen)
}

func named(ms *modelServer, more ...string) map[string]string {
	m := map[string]string{"namespace": ms.Namespace, "name": ms.Name}
	for i := 0; i+1 < len(more); i += 2 {
		m[more[i]] = more[i+1]
	}
	return m
}

func TestAFailedModelServerIsAlertedOfByNameAfterFiveMinutes(t *testing.T) {
	p := newPrometheus(t)
	ms := newModelServer(t, "resnet")
	ms.is(servingv1alpha1.PhaseFetching, servingv1alpha1.ReasonFetching)
	p.run(2 * time.Minute)
	ms.is(servingv1alpha1.PhaseFailed, servingv1alpha1.ReasonAccessDenied)
	a := p.firesAfter(5*time.Minute, "ModelServerFailed", named(ms, "reason", "AccessDenied", "severity", "warning"))
	if want := "ModelServer ml-team/resnet has failed (AccessDenied)."; a.annotations["summary"] != want {
		t.Errorf("summary %q, want %q", a.annotations["summary"], want)
	}
	if want := "kubectl -n ml-team describe modelserver resnet"; !strings.Contains(a.annotations["description"], want) {
		t.Errorf("description %q lacks %q", a.annotations["description"], want)
	}
	// Fixed: the next scrape has its series in the phase it moved to, the
	// Failed one stale, and the alert ends at the next evaluation.
	ms.is(servingv1alpha1.PhaseReady, servingv1alpha1.ReasonReady)
	p.step()
	p.expectNotFiring("ModelServerFailed", named(ms))
	if got := p.firingNames(); len(got) != 0 {
		t.Errorf("firing once Ready: %v", got)
	}
}

// With leader election the ModelServer's series comes from whichever pod
// leads: a new leader carries on its alert, which neither ends nor waits
// its 5 minutes again.
func TestAnAlertCarriesOnAcrossALeaderChange(t *testing.T) {
	p := newPrometheus(t)
	ms := newModelServer(t, "bert")
	ms.is(servingv1alpha1.PhaseFailed, servingv1alpha1.ReasonInvalidSpec)
	p.run(3 * time.Minute)
	p.target = operatorPod("modelserver-controller-manager-6d4f9-vwxyz")
	p.run(2*time.Minute + interval)
	p.expectFiring("ModelServerFailed", named(ms, "reason", "InvalidSpec"))
}

// Pods lost are an outage, alerted of as critical; a failed refetch while
// the old model serves is not.
func TestLostPodsAreCriticalAndAFailedRefetchIsNot(t *testing.T) {
	p := newPrometheus(t)
	down, stale := newModelServer(t, "down"), newModelServer(t, "stale")
	down.is(servingv1alpha1.PhaseDegraded, servingv1alpha1.ReasonPodsNotReady)
	stale.is(servingv1alpha1.PhaseDegraded, servingv1alpha1.ReasonNotFound)
	p.run(5*time.Minute + interval)
	p.expectFiring("ModelServerDown", named(down, "severity", "critical"))
	p.expectNotFiring("ModelServerDown", named(stale))
	p.expectNotFiring("ModelServerModelNotUpdated", named(stale))
	p.run(10 * time.Minute)
	a := p.expectFiring("ModelServerModelNotUpdated", named(stale, "reason", "NotFound", "severity", "warning"))
	if !strings.Contains(a.annotations["summary"], "serves the one before") {
		t.Errorf("summary %q", a.annotations["summary"])
	}
	p.expectNotFiring("ModelServerModelNotUpdated", named(down))
}

// A ModelServer that stays on its way to Ready is alerted of after 30
// minutes, however its steps change; one still fetching is not (a large
// model may take hours; the fetch alerts watch it).
func TestAModelServerThatDoesNotBecomeReadyIsAlertedOfAfterHalfAnHour(t *testing.T) {
	p := newPrometheus(t)
	stuck, fetching := newModelServer(t, "stuck"), newModelServer(t, "large")
	stuck.is(servingv1alpha1.PhasePending, "")
	fetching.is(servingv1alpha1.PhaseFetching, servingv1alpha1.ReasonFetching)
	p.run(10 * time.Minute)
	stuck.is(servingv1alpha1.PhaseDeploying, servingv1alpha1.ReasonRollingOut)
	p.run(10 * time.Minute)
	stuck.is(servingv1alpha1.PhaseDeploying, servingv1alpha1.ReasonPodsNotReady)
	p.firesAfter(10*time.Minute, "ModelServerNotReady", named(stuck))
	p.expectNotFiring("ModelServerNotReady", named(fetching))
}

// A pause forgotten is alerted of once it has lasted a day; a pause that
// ends before, or a ModelServer never paused, is not.
func TestAPauseOfMoreThanADayIsAlertedOf(t *testing.T) {
	p := newPrometheus(t)
	forgotten, short, running := newModelServer(t, "forgotten"), newModelServer(t, "short"), newModelServer(t, "running")
	forgotten.PausedSince = p.now.Add(-23*time.Hour - 30*time.Minute)
	short.PausedSince = p.now.Add(-23 * time.Hour)
	for _, ms := range []*modelServer{forgotten, short, running} {
		ms.is(servingv1alpha1.PhaseReady, servingv1alpha1.ReasonReady)
	}
	p.run(35 * time.Minute)
	p.expectNotFiring("ModelServerPausedForADay", named(forgotten))
	short.PausedSince = time.Time{}
	short.is(servingv1alpha1.PhaseReady, servingv1alpha1.ReasonReady)
	a := p.firesAfter(5*time.Minute, "ModelServerPausedForADay", named(forgotten, "severity", "warning"))
	if !strings.Contains(a.annotations["description"], "annotate modelserver forgotten serving.modelserver.dev/paused-") {
		t.Errorf("description %q does not say how to resume it", a.annotations["description"])
	}
	p.run(30 * time.Minute)
	p.expectNotFiring("ModelServerPausedForADay", named(short))
	p.expectNotFiring("ModelServerPausedForADay", named(running))
	forgotten.PausedSince = time.Time{}
	forgotten.is(servingv1alpha1.PhaseReady, servingv1alpha1.ReasonReady)
	p.step()
	p.expectNotFiring("ModelServerPausedForADay", named(forgotten))
}

// The problems the operator counts are alerted of by the ModelServer that
// has them, once they last, with their cause.
func TestEachProblemIsAlertedOfByNameOnceItLasts(t *testing.T) {
	for _, tc := range []struct {
		alert   string
		set     func(*modelServer)
		lasting time.Duration
		labels  []string
	}{
		{"ModelServerRolloutStalled", func(ms *modelServer) { metrics.Stalled(ms.UID, status.CauseImagePull) }, 15 * time.Minute, []string{"cause", "ImagePull"}},
		{"ModelServerFetchNotStarting", func(ms *modelServer) { metrics.StalledFetch(ms.UID, status.CauseUnschedulable) }, 10 * time.Minute, []string{"cause", "Unschedulable"}},
		{"ModelServerFetchOutOfTime", func(ms *modelServer) { metrics.SlowFetch(ms.UID, status.SlowFetchOutOfTime) }, 2 * time.Minute, nil},
		{"ModelServerFetchReceivingNothing", func(ms *modelServer) { metrics.SlowFetch(ms.UID, status.SlowFetchNothingReceived) }, 5 * time.Minute, nil},
		{"ModelServerRefreshFailing", func(ms *modelServer) { metrics.RefreshFailed(ms.UID, true) }, 15 * time.Minute, nil},
		{"ModelServerAutoscalerInactive", func(ms *modelServer) { metrics.InactiveAutoscaler(ms.UID, status.AutoscalerCauseMetrics) }, 5 * time.Minute, []string{"cause", "Metrics"}},
		{"ModelServerAutoscalerAtMaximum", func(ms *modelServer) { metrics.AutoscalerAtMaximum(ms.UID, true) }, 15 * time.Minute, nil},
	} {
		t.Run(tc.alert, func(t *testing.T) {
			p := newPrometheus(t)
			ms := newModelServer(t, "p-"+strings.ToLower(tc.alert))
			ms.is(servingv1alpha1.PhaseReady, servingv1alpha1.ReasonReady)
			tc.set(ms)
			a := p.firesAfter(tc.lasting, tc.alert, named(ms, tc.labels...))
			if !strings.Contains(a.annotations["summary"], "ml-team/"+ms.Name) {
				t.Errorf("summary %q does not name the ModelServer", a.annotations["summary"])
			}
			metrics.Forget(ms.UID)
			p.step()
			p.expectNotFiring(tc.alert, named(ms))
		})
	}
}

// A rollout stalled on nothing the pods say (a model still loading, a
// readiness probe failing) is not this alert's: ModelServerNotReady, or
// ModelServerDown, tell of it. Nor are pods downloading their own copies
// of a large model: a fetch that stops fails, and is a CrashLoop.
func TestARolloutStalledForAnUnknownCauseIsNotAlertedOfAsStalled(t *testing.T) {
	for _, cause := range []string{status.CauseUnknown, status.CauseFetching} {
		t.Run(cause, func(t *testing.T) {
			p := newPrometheus(t)
			ms := newModelServer(t, "loading")
			ms.is(servingv1alpha1.PhaseDeploying, servingv1alpha1.ReasonPodsNotReady)
			metrics.Stalled(ms.UID, cause)
			p.run(20 * time.Minute)
			p.expectNotFiring("ModelServerRolloutStalled", named(ms))
		})
	}
}

func TestAnOperatorNobodyScrapesIsAlertedOf(t *testing.T) {
	for name, stop := range map[string]func(*prometheus){
		"its scrapes fail": func(p *prometheus) { p.down = true },
		"its pod is gone":  func(p *prometheus) { p.gone = true },
	} {
		t.Run(name, func(t *testing.T) {
			p := newPrometheus(t)
			p.run(5 * time.Minute)
			p.expectNotFiring("ModelServerOperatorDown", nil)
			stop(p)
			p.firesAfter(5*time.Minute, "ModelServerOperatorDown", map[string]string{"severity": "critical"})
		})
	}
}

// The controller's errors are counted by controller-runtime; a real
// controller named as the operator's, whose reconciles fail as asked,
// writes them.
func TestReconcilesThatKeepFailingAreAlertedOf(t *testing.T) {
	var failing atomic.Int64 // of each 10 requests, so many fail once
	var done sync.WaitGroup
	var once sync.Map
	enqueue := startController(t, "modelserver", func(req reconcile.Request) error {
		defer done.Done()
		n, err := strconv.Atoi(strings.TrimPrefix(req.Name, "r"))
		if err != nil {
			return err
		}
		if int64(n%10) < failing.Load() {
			if _, retried := once.LoadOrStore(req.Name, true); !retried {
				done.Add(1) // the retry
				return fmt.Errorf("%s failed", req.Name)
			}
		}
		return nil
	})
	p := newPrometheus(t)
	seq := 0
	reconcileSome := func(d time.Duration) {
		for end := p.now.Add(d); p.now.Before(end); {
			for range 10 {
				done.Add(1)
				enqueue(fmt.Sprintf("r%d", seq))
				seq++
			}
			done.Wait()
			p.step()
		}
	}
	failing.Store(1) // 1 in 11 reconciles fail: under the threshold
	reconcileSome(30 * time.Minute)
	p.expectNotFiring("ModelServerOperatorReconcileErrors", nil)
	// 3 in 13: over the threshold from the first minute or so, as the
	// rate's 10-minute window fills, and alerted of 15 minutes later.
	failing.Store(3)
	reconcileSome(15 * time.Minute)
	p.expectNotFiring("ModelServerOperatorReconcileErrors", nil)
	reconcileSome(2 * time.Minute)
	a := p.expectFiring("ModelServerOperatorReconcileErrors", map[string]string{"namespace": "modelserver-system"})
	if !strings.Contains(a.annotations["description"], "23.08%") {
		t.Errorf("description %q, want the share of errors (3 in 13)", a.annotations["description"])
	}
}

// startController starts a controller of controller-runtime named name,
// unmanaged, that reconciles with do, and returns what enqueues a request.
func startController(t *testing.T, name string, do func(reconcile.Request) error) func(string) {
	t.Helper()
	requests := make(chan string, 100)
	c, err := controller.NewUnmanaged(name, controller.Options{
		SkipNameValidation: ptr.To(true),
		Reconciler: reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
			return reconcile.Result{}, do(req)
		}),
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Millisecond, time.Millisecond),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Watch(source.TypedFunc[reconcile.Request](func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case n := <-requests:
					q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ml", Name: n}})
				}
			}
		}()
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan error, 1)
	go func() { started <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-started; err != nil {
			t.Errorf("controller %s: %v", name, err)
		}
	})
	return func(n string) { requests <- n }
}

// servingPod are the labels a serving pod of ModelServer name in ml's
// namespace gives its series, scraped through the ModelServer's
// ServiceMonitor, whose Service has its name.
func servingPod(name, pod string) string {
	return fmt.Sprintf(`job=%q,namespace=%q,service=%q,pod=%q,endpoint="http",instance="198.18.0.9:8501"`, name, ml, name, pod)
}

// A model whose requests fail on the server's side is alerted of once
// they are over 1 in 20 for 10 minutes; requests refused as invalid are
// the clients' fault, and never count.
func TestRequestsFailingOnTheServersSideAreAlertedOf(t *testing.T) {
	p := newPrometheus(t)
	pod := servingPod("resnet", "resnet-7d9f8-x2x8z")
	series := func(status string) string {
		return fmt.Sprintf(`:tensorflow:serving:request_count{%s,model_name="resnet",status=%q}`, pod, status)
	}
	// Requests in each 30 s, by status.
	serve := func(d time.Duration, per map[string]float64) {
		for end := p.now.Add(d); p.now.Before(end); {
			for status, n := range per {
				p.more[series(status)] += n
			}
			p.step()
		}
	}
	serve(20*time.Minute, map[string]float64{"OK": 870, "INVALID_ARGUMENT": 100, "INTERNAL": 30})
	p.expectNotFiring("ModelServerRequestsFailing", nil)
	// 8%: over the threshold once the rate's 5-minute window holds 2 of
	// them, and alerted of 10 minutes later.
	serve(11*time.Minute, map[string]float64{"OK": 820, "INVALID_ARGUMENT": 100, "UNAVAILABLE": 80})
	p.expectNotFiring("ModelServerRequestsFailing", nil)
	serve(2*time.Minute, map[string]float64{"OK": 820, "INVALID_ARGUMENT": 100, "UNAVAILABLE": 80})
	a := p.expectFiring("ModelServerRequestsFailing", map[string]string{"namespace": ml, "service": "resnet", "model_name": "resnet"})
	if want := "Over 5% of the requests to model resnet of ModelServer ml-team/resnet fail on the server's side."; a.annotations["summary"] != want {
		t.Errorf("summary %q, want %q", a.annotations["summary"], want)
	}
	if !strings.Contains(a.annotations["description"], "8%") {
		t.Errorf("description %q, want the share failing (8%%)", a.annotations["description"])
	}
}

// A version a pod has failed to load, retries included, is alerted of;
// one whose retry loaded it is not. TF Serving's count of failed loads
// starts at 1, at the first failure.
func TestAVersionThatCannotBeLoadedIsAlertedOf(t *testing.T) {
	p := newPrometheus(t)
	pod := servingPod("bert", "bert-5c6d7-q9w4k")
	load := func(version, status string) string {
		return fmt.Sprintf(`:tensorflow:cc:saved_model:load_attempt_count{%s,model_path="/models/bert/%s",status=%q}`, pod, version, status)
	}
	p.more[load("1", "success")] = 1
	p.run(10 * time.Minute)
	// Version 2 fails, and a retry loads it; version 3 fails for good.
	p.more[load("2", "fail")] = 1
	p.more[load("3", "fail")] = 1
	p.run(time.Minute)
	p.more[load("2", "success")] = 1
	p.more[load("3", "fail")] = 5
	a := p.firesAfter(4*time.Minute, "ModelServerModelVersionNotLoaded", map[string]string{"namespace": ml, "service": "bert", "model_path": "/models/bert/3"})
	if !strings.Contains(a.annotations["summary"], "ml-team/bert cannot be loaded (/models/bert/3)") {
		t.Errorf("summary %q", a.annotations["summary"])
	}
	p.expectNotFiring("ModelServerModelVersionNotLoaded", map[string]string{"model_path": "/models/bert/2"})
}

// latencyBuckets are the upper bounds of TF Serving's request latency
// histogram, in microseconds: 10 × 1.8^i for 33 buckets, then +Inf.
var latencyBuckets = func() []float64 {
	b := make([]float64, 33)
	for i := range b {
		b[i] = 10 * math.Pow(1.8, float64(i))
	}
	return append(b, math.Inf(1))
}()

// requests adds to TF Serving's latency histogram of a pod's model and API
// the requests of one interval: n of them, a share slow (in the bucket
// from 219 to 393 ms) and the others fast (from 6.4 to 11.6 ms).
func (p *prometheus) requests(pod, model, api string, n, slow float64) {
	for i, le := range latencyBuckets {
		count := 0.0
		if i >= 12 {
			count += n * (1 - slow)
		}
		if i >= 18 {
			count += n * slow
		}
		bound := strconv.FormatFloat(le, 'g', 6, 64)
		if math.IsInf(le, 1) {
			bound = "+Inf"
		}
		p.more[fmt.Sprintf(`:tensorflow:serving:request_latency_bucket{%s,model_name=%q,API=%q,entrypoint="GRPC",le=%q}`, pod, model, api, bound)] += count
	}
	p.more[fmt.Sprintf(`:tensorflow:serving:request_latency_count{%s,model_name=%q,API=%q,entrypoint="GRPC"}`, pod, model, api)] += n
}

// A ModelServer whose p99 stands over its own objective is alerted of
// after 10 minutes; one without an objective, one with too few requests
// for a p99, and slow model status requests (the probes') are not.
func TestALatencyOverItsObjectiveIsAlertedOf(t *testing.T) {
	p := newPrometheus(t)
	resnet, quiet, free := newModelServer(t, "resnet"), newModelServer(t, "quiet"), newModelServer(t, "free")
	for _, ms := range []*modelServer{resnet, quiet} {
		ms.P99Latency = 250 * time.Millisecond
	}
	for _, ms := range []*modelServer{resnet, quiet, free} {
		ms.is(servingv1alpha1.PhaseReady, servingv1alpha1.ReasonReady)
	}
	serve := func(d time.Duration, slow float64) {
		for end := p.now.Add(d); p.now.Before(end); {
			p.requests(servingPod("resnet", "resnet-7d9f8-x2x8z"), "resnet", "predict", 3000, slow)
			// Model status requests (probes, health checks), all slow:
			// counted, they would put 1 in 100 requests in the slow
			// bucket.
			p.requests(servingPod("resnet", "resnet-7d9f8-x2x8z"), "resnet", "", 30, 1)
			p.requests(servingPod("free", "free-6c5d4-a1b2c"), "free", "predict", 3000, slow)
			p.requests(servingPod("quiet", "quiet-5b4c3-d4e5f"), "quiet", "predict", 15, slow)
			p.step()
		}
	}
	// 1 in 200 slow: the p99 is in the fast bucket.
	serve(20*time.Minute, 0.005)
	p.expectNotFiring("ModelServerLatencyHigh", nil)
	// 3 in 100 slow: the p99 is in the slow bucket, over the objective,
	// once the rate's 5-minute window holds more of them than the p99's
	// share; alerted of 10 minutes later.
	serve(11*time.Minute, 0.03)
	p.expectNotFiring("ModelServerLatencyHigh", nil)
	serve(4*time.Minute, 0.03)
	a := p.expectFiring("ModelServerLatencyHigh", map[string]string{"namespace": ml, "service": "resnet"})
	if !strings.Contains(a.annotations["description"], "335.") {
		t.Errorf("description %q, want the p99 (335 ms)", a.annotations["description"])
	}
	p.expectNotFiring("ModelServerLatencyHigh", map[string]string{"service": "free"})
	p.expectNotFiring("ModelServerLatencyHigh", map[string]string{"service": "quiet"})
	// The objective raised: the alert ends.
	resnet.P99Latency = 500 * time.Millisecond
	resnet.is(servingv1alpha1.PhaseReady, servingv1alpha1.ReasonReady)
	serve(time.Minute, 0.03)
	p.expectNotFiring("ModelServerLatencyHigh", nil)
}

// outcomes adds to TF Serving's request counts of a pod's model the
// requests of one interval: n of them, a share failing on the server's
// side (UNAVAILABLE), the others OK.
func (p *prometheus) outcomes(pod, model string, n, failing float64) {
	count := func(status string) string {
		return fmt.Sprintf(`:tensorflow:serving:request_count{%s,model_name=%q,status=%q}`, pod, model, status)
	}
	p.more[count("OK")] += n * (1 - failing)
	p.more[count("UNAVAILABLE")] += n * failing
}

// A ModelServer whose errors spend its budget at 20 times its rate is
// alerted of, critically, once they have spent 2% of a 30-day budget, and
// as burning slowly once they have spent 5%; a ModelServer without an
// objective, and a 10-minute spike, are not.
func TestABurningErrorBudgetIsAlertedOf(t *testing.T) {
	p := newPrometheus(t)
	resnet, spiky, free := newModelServer(t, "resnet"), newModelServer(t, "spiky"), newModelServer(t, "free")
	for _, ms := range []*modelServer{resnet, spiky} {
		ms.Availability = 0.999
	}
	for _, ms := range []*modelServer{resnet, spiky, free} {
		ms.is(servingv1alpha1.PhaseReady, servingv1alpha1.ReasonReady)
	}
	serve := func(d time.Duration, failing map[string]float64) {
		for end := p.now.Add(d); p.now.Before(end); {
			for _, ms := range []string{"resnet", "spiky", "free"} {
				p.outcomes(servingPod(ms, ms+"-7d9f8-x2x8z"), ms, 1000, failing[ms])
			}
			p.step()
		}
	}
	// Half the budget's rate, for 2 hours.
	serve(2*time.Hour, map[string]float64{"resnet": 0.0005, "spiky": 0.0005, "free": 0.0005})
	// 5% of spiky's requests fail for 10 minutes: 50 times its budget's
	// rate, but 0.8% over the hour, under 14.4 times (1.44%).
	serve(10*time.Minute, map[string]float64{"resnet": 0.0005, "spiky": 0.05, "free": 0.0005})
	serve(20*time.Minute, map[string]float64{"resnet": 0.0005, "spiky": 0.0005, "free": 0.0005})
	// 2% of resnet's and free's requests fail: the hour's share passes
	// 1.44% after about 43 minutes.
	failing := map[string]float64{"resnet": 0.02, "spiky": 0.0005, "free": 0.02}
	serve(40*time.Minute, failing)
	p.expectNotFiring("ModelServerErrorBudgetBurning", nil)
	serve(10*time.Minute, failing)
	a := p.expectFiring("ModelServerErrorBudgetBurning", map[string]string{"namespace": ml, "service": "resnet", "severity": "critical"})
	if share, err := strconv.ParseFloat(strings.SplitN(a.annotations["description"], "%", 2)[0], 64); err != nil || share < 1.44 || share > 2 {
		t.Errorf("description %q, want the hour's share of errors (from 1.44%% to 2%%)", a.annotations["description"])
	}
	p.expectNotFiring("ModelServerErrorBudgetBurningSlowly", nil)
	// The 6 hours' share passes 0.6% after about 1¾ hours.
	serve(75*time.Minute, failing)
	p.expectFiring("ModelServerErrorBudgetBurningSlowly", map[string]string{"namespace": ml, "service": "resnet", "severity": "warning"})
	for _, alert := range []string{"ModelServerErrorBudgetBurning", "ModelServerErrorBudgetBurningSlowly"} {
		p.expectNotFiring(alert, map[string]string{"service": "spiky"})
		p.expectNotFiring(alert, map[string]string{"service": "free"})
	}
	// The errors stop: the fast alert ends within 5 minutes, its short
	// window's.
	serve(6*time.Minute, map[string]float64{})
	p.expectNotFiring("ModelServerErrorBudgetBurning", nil)
}

// A ModelServer that serves a request every 3 minutes is not paged for
// one that failed, though that is a share of errors far over its budget;
// one that fails all its requests at that traffic is, once 10 of them
// have failed.
func TestOneFailureOfALittleUsedModelServerPagesNoOne(t *testing.T) {
	p := newPrometheus(t)
	quiet := newModelServer(t, "quiet")
	quiet.Availability = 0.999
	quiet.is(servingv1alpha1.PhaseReady, servingv1alpha1.ReasonReady)
	pod := servingPod("quiet", "quiet-7d9f8-x2x8z")
	serve := func(d time.Duration, failing float64) {
		for end := p.now.Add(d); p.now.Before(end); {
			if p.now.Unix()%180 == 0 {
				p.outcomes(pod, "quiet", 1, failing)
			}
			p.step()
		}
	}
	serve(2*time.Hour, 0)
	serve(3*time.Minute, 1)
	serve(30*time.Minute, 0)
	p.expectNotFiring("ModelServerErrorBudgetBurning", nil)
	p.expectNotFiring("ModelServerErrorBudgetBurningSlowly", nil)
	// Every request fails: the tenth, half an hour on, fires it.
	serve(25*time.Minute, 1)
	p.expectNotFiring("ModelServerErrorBudgetBurning", nil)
	serve(10*time.Minute, 1)
	p.expectFiring("ModelServerErrorBudgetBurning", map[string]string{"namespace": ml, "service": "quiet", "severity": "critical"})
}
