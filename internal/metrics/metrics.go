// Package metrics holds the operator's own Prometheus metrics, served with
// controller-runtime's on the manager's metrics endpoint: ModelServers by
// phase, stalled rollouts by cause, and each ModelServer's phase, problems
// and objectives by name (for alerts that name it), Helm
// operations, model fetches, and the time a ModelServer takes to become
// Ready after its spec changed. docs/metrics.md lists them.
package metrics

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/status"
)

// Namespace prefixes every metric of the operator.
const Namespace = "modelserver"

// Results of a Helm operation or a fetch, as the "result" label says them.
const (
	ResultSuccess  = "success"
	ResultFailure  = "failure"
	ResultConflict = "conflict"
)

var (
	phaseGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace,
		Name:      "modelservers",
		Help:      "ModelServers this operator process reconciles, by status phase.",
	}, []string{"phase"})

	// One series per ModelServer, so that an alert can name the one it is
	// about: the phase alone would say how many, not which.
	statusGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace,
		Name:      "status_phase",
		Help:      "1 for each ModelServer this operator process reconciles, labelled with its namespace, name, status phase and the reason of the condition that decides it.",
	}, []string{"namespace", "name", "phase", "reason"})

	// The ModelServers the gauges below count, by name, for the same
	// reason.
	problemGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace,
		Name:      "problem",
		Help:      "1 for each problem a ModelServer has that a gauge of this operator counts (a stalled rollout or fetch, a slow fetch, an autoscaler that cannot scale or is at its maximum, a failed refresh round), labelled with its namespace, name, the problem and its cause.",
	}, []string{"namespace", "name", "problem", "cause"})

	// Each ModelServer's latency objective, beside TF Serving's own
	// latency histogram, for an alert that holds each to its own.
	latencyObjective = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace,
		Name:      "latency_objective_seconds",
		Help:      "The latency 99 in 100 of a ModelServer's requests should stay under (spec.monitoring.p99Latency), for each ModelServer that sets it, labelled with its namespace and name.",
	}, []string{"namespace", "name"})

	// And its availability objective, for alerts on the rate its error
	// budget burns at.
	availabilityObjective = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace,
		Name:      "availability_objective_ratio",
		Help:      "The share of a ModelServer's requests that should not fail on the server's side (spec.monitoring.availability, as a ratio), for each ModelServer that sets it, labelled with its namespace and name.",
	}, []string{"namespace", "name"})

	pausedSince = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace,
		Name:      "paused_since_seconds",
		Help:      "When a ModelServer's reconciliation was paused (the annotation serving.modelserver.dev/paused: \"true\"), in seconds since the epoch, for each ModelServer paused now, labelled with its namespace and name.",
	}, []string{"namespace", "name"})

	helmOperations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace,
		Name:      "helm_operations_total",
		Help:      "Helm operations run on ModelServer releases, by operation (install, upgrade, recover, uninstall) and result (success, failure, conflict).",
	}, []string{"operation", "result"})

	helmDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace,
		Name:      "helm_operation_duration_seconds",
		Help:      "Time a Helm operation on a ModelServer release took, by operation.",
		Buckets:   []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120},
	}, []string{"operation"})

	fetchDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace,
		Name:      "fetch_duration_seconds",
		Help:      "Time from the start of a model-fetch Job to its end, by result (success, failure).",
		Buckets:   []float64{1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600},
	}, []string{"result"})

	fetchFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace,
		Name:      "fetch_failures_total",
		Help:      "Model-fetch Jobs that failed, by the reason the ModelServer's status gives (NotFound, AccessDenied, Timeout, OutOfMemory, ...).",
	}, []string{"reason"})

	fetchBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace,
		Name:      "fetch_bytes_total",
		Help:      "Bytes of the models that fetch Jobs reported in their completion summary.",
	})

	fetchReceived = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace,
		Name:      "fetch_received_bytes_total",
		Help:      "Bytes that fetch Jobs which succeeded received from the stores, as their summaries reported: what was not taken from a copy on the volume.",
	})

	fetchModelBytes = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace,
		Name:      "fetch_model_size_bytes",
		Help:      "Size of each fetched model, as its fetch Job reported it.",
		Buckets:   prometheus.ExponentialBuckets(1<<20, 4, 10), // 1 MiB to 256 GiB
	})

	stalledGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace,
		Name:      "stalled_rollouts",
		Help:      "ModelServers whose serving pods have stood not ready with no progress for 30 s, by what stops most of them.",
	}, []string{"cause"})

	stalledFetchGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace,
		Name:      "stalled_fetches",
		Help:      "ModelServers whose model-fetch pods have stood Pending for 30 s with a reason named (no node takes them, an image that cannot be pulled, a volume that does not mount), by what stops most of them.",
	}, []string{"cause"})

	slowFetchGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace,
		Name:      "slow_fetches",
		Help:      "ModelServers whose running model fetch, as its pod's log last said, will not finish within spec.fetch.timeout at its rate (OutOfTime), or has received nothing for 30 s (NothingReceived).",
	}, []string{"cause"})
	inactiveAutoscalerGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace,
		Name:      "inactive_autoscalers",
		Help:      "ModelServers whose autoscaler has said for 2 minutes that it cannot scale (no metrics, a selector or scale it cannot use, a target scaled to zero), by cause.",
	}, []string{"cause"})

	atMaximumGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace,
		Name:      "autoscalers_at_maximum",
		Help:      "ModelServers whose autoscaler has wanted more serving pods than spec.autoscaling.maxReplicas for a minute: endpoints serving at their most.",
	})

	failedRefreshGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace,
		Name:      "failed_refreshes",
		Help:      "ModelServers with a model whose newest refresh round (refreshInterval) failed: the model fetched before is still served, and the ModelServer stays Ready.",
	})

	timeToReady = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace,
		Name:      "time_to_ready_seconds",
		Help:      "Time from a change of a ModelServer's generation (its creation or a spec change) to its Ready condition for that generation.",
		Buckets:   []float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600},
	})
)

// collectors are the operator's metrics, registered with controller-runtime.
var collectors = []prometheus.Collector{phaseGauge, statusGauge, problemGauge, latencyObjective, availabilityObjective, pausedSince, stalledGauge, stalledFetchGauge, slowFetchGauge, inactiveAutoscalerGauge, atMaximumGauge, failedRefreshGauge, helmOperations, helmDuration, fetchDuration, fetchFailures, fetchBytes, fetchReceived, fetchModelBytes, timeToReady}

func init() {
	ctrlmetrics.Registry.MustRegister(collectors...)
	for _, p := range Phases {
		phaseGauge.WithLabelValues(p)
	}
	for _, c := range status.Causes {
		stalledGauge.WithLabelValues(c)
	}
	for _, c := range FetchCauses {
		stalledFetchGauge.WithLabelValues(c)
	}
	for _, c := range status.AutoscalerCauses {
		inactiveAutoscalerGauge.WithLabelValues(c)
	}
	for _, c := range status.SlowFetchCauses {
		slowFetchGauge.WithLabelValues(c)
	}
	for _, r := range FetchFailureReasons {
		fetchFailures.WithLabelValues(r)
	}
}

// FetchFailureReasons are the reasons a fetch Job fails for, present at 0
// from the start, for an alert on their increase.
var FetchFailureReasons = []string{
	servingv1alpha1.ReasonNotFound, servingv1alpha1.ReasonAccessDenied, servingv1alpha1.ReasonInvalidLayout,
	servingv1alpha1.ReasonChecksumMismatch, servingv1alpha1.ReasonTooLarge, servingv1alpha1.ReasonTimeout,
	servingv1alpha1.ReasonOutOfMemory, servingv1alpha1.ReasonInvalidURI, servingv1alpha1.ReasonSignatureNotVerified,
	servingv1alpha1.ReasonFetchFailed,
}

// FetchCauses are the causes a stalled fetch is counted under: only a
// named reason counts a fetch as stalled, so never status.CauseUnknown;
// nor status.CauseCrashLoop, which takes a container that has run, and a
// fetch pod that has not started has run none.
var FetchCauses = []string{status.CauseUnschedulable, status.CauseImagePull, status.CauseContainerStart, status.CausePodWarning}

// Phases are the values of the phase label, present at 0 from the start
// so that a query for a phase nobody is in yet returns 0, not nothing.
var Phases = []string{"Pending", "Fetching", "Deploying", "Ready", "Degraded", "Failed", "Deleting", "Paused"}

// HelmOperation records one Helm operation and how long it took.
func HelmOperation(operation, result string, took time.Duration) {
	helmOperations.WithLabelValues(operation, result).Inc()
	helmDuration.WithLabelValues(operation).Observe(took.Seconds())
}

// tracked is what the package remembers of one ModelServer.
type tracked struct {
	// namespace and name are "" until the first Observe: problems
	// recorded before it get their series then.
	namespace, name string
	phase           string
	// series are the labels of its statusGauge series, nil before the
	// first Observe.
	series []string
	// stalled is the cause of its stalled rollout, "" if none;
	// stalledFetch, of its fetch pods' not starting; slowFetch, of its
	// running fetch's slowness; autoscaler, of its autoscaler's not
	// scaling.
	stalled, stalledFetch, slowFetch, autoscaler string
	// atMaximum says its autoscaler is counted at its maximum;
	// refreshFailed, that it is counted with a failed refresh round.
	atMaximum, refreshFailed bool
	// latency and availability are the values of its objectives' series
	// (seconds, a ratio), 0 for none; paused, of its pausedSince series.
	latency, availability, paused float64
	// generation and since: the generation last seen and when it was
	// first seen; ready says time to Ready was recorded for it.
	generation int64
	since      time.Time
	ready      bool
	// fetches are the UIDs of the fetch Jobs recorded (one per model and
	// fetch generation), so that a fetch is counted once however often
	// its end is observed.
	fetches map[types.UID]struct{}
}

var (
	mu      sync.Mutex
	servers = map[types.UID]*tracked{}
)

func get(uid types.UID) *tracked {
	t, ok := servers[uid]
	if !ok {
		t = &tracked{}
		servers[uid] = t
	}
	return t
}

// Seen is what a reconcile saw of a ModelServer.
type Seen struct {
	UID             types.UID
	Namespace, Name string
	Generation      int64
	// ChangedAt is the time the generation was created when known (the
	// object's creation for generation 1); otherwise the first time this
	// process sees a generation counts.
	ChangedAt time.Time
	// Phase is the status phase, Reason the reason of the condition that
	// decides it (status.Reason); Ready says whether the generation is
	// Ready.
	Phase, Reason string
	Ready         bool
	// P99Latency is spec.monitoring.p99Latency, 0 when unset;
	// Availability, spec.monitoring.availability as a ratio (0.999 for
	// 99.9), 0 when unset.
	P99Latency   time.Duration
	Availability float64
	// PausedSince is when its Paused condition turned True, zero while it
	// is not paused.
	PausedSince time.Time
}

// Observe records the state of a ModelServer after a reconcile: its phase,
// and whether the generation that changed is now Ready.
func Observe(s Seen) {
	mu.Lock()
	defer mu.Unlock()
	_, seen := servers[s.UID]
	t := get(s.UID)
	if t.name == "" {
		t.namespace, t.name = s.Namespace, s.Name
		for _, p := range t.problems() {
			t.problemSeries(p.problem, false, "", p.on, p.cause)
		}
	}
	if t.phase != s.Phase {
		if t.phase != "" {
			phaseGauge.WithLabelValues(t.phase).Dec()
		}
		phaseGauge.WithLabelValues(s.Phase).Inc()
		t.phase = s.Phase
	}
	if series := []string{s.Namespace, s.Name, s.Phase, s.Reason}; !slices.Equal(t.series, series) {
		if t.series != nil {
			statusGauge.DeleteLabelValues(t.series...)
		}
		statusGauge.WithLabelValues(series...).Set(1)
		t.series = series
	}
	t.objective(latencyObjective, &t.latency, s.P99Latency.Seconds())
	t.objective(availabilityObjective, &t.availability, s.Availability)
	paused := 0.0
	if !s.PausedSince.IsZero() {
		paused = float64(s.PausedSince.Unix())
	}
	t.objective(pausedSince, &t.paused, paused)
	if t.generation != s.Generation {
		t.generation, t.ready = s.Generation, false
		t.since = s.ChangedAt
		if t.since.IsZero() {
			t.since = time.Now()
		}
		// Ready when this process first sees it: it became Ready before
		// (under another operator process), at a time nobody recorded.
		t.ready = !seen && s.Ready
	}
	if s.Ready && !t.ready {
		t.ready = true
		timeToReady.Observe(time.Since(t.since).Seconds())
	}
}

// Stalled records the cause of a ModelServer's stalled rollout, "" when
// its rollout is not stalled.
func Stalled(uid types.UID, cause string) {
	recordCause(uid, ProblemStalledRollout, stalledGauge, func(t *tracked) *string { return &t.stalled }, cause)
}

// StalledFetch records the cause that keeps a ModelServer's fetch pods from
// starting, once named; "" when nothing does.
func StalledFetch(uid types.UID, cause string) {
	recordCause(uid, ProblemStalledFetch, stalledFetchGauge, func(t *tracked) *string { return &t.stalledFetch }, cause)
}

// SlowFetch records why a ModelServer's running fetch is slow
// (status.SlowFetch); "" when it is not, or none runs.
func SlowFetch(uid types.UID, cause string) {
	recordCause(uid, ProblemSlowFetch, slowFetchGauge, func(t *tracked) *string { return &t.slowFetch }, cause)
}

// InactiveAutoscaler records the cause that keeps a ModelServer's
// autoscaler from scaling, once it has lasted; "" when nothing does.
func InactiveAutoscaler(uid types.UID, cause string) {
	recordCause(uid, ProblemInactiveAutoscaler, inactiveAutoscalerGauge, func(t *tracked) *string { return &t.autoscaler }, cause)
}

// AutoscalerAtMaximum records whether a ModelServer's autoscaler has
// wanted more pods than its maximum for a while.
func AutoscalerAtMaximum(uid types.UID, at bool) {
	recordFlag(uid, ProblemAutoscalerAtMaximum, atMaximumGauge, func(t *tracked) *bool { return &t.atMaximum }, at)
}

// RefreshFailed records whether a model of a ModelServer failed its
// newest refresh round.
func RefreshFailed(uid types.UID, failed bool) {
	recordFlag(uid, ProblemFailedRefresh, failedRefreshGauge, func(t *tracked) *bool { return &t.refreshFailed }, failed)
}

// recordFlag counts uid in gauge, or no more, as on says, in the field of
// its record that field names, and in its series of problem.
func recordFlag(uid types.UID, problem string, gauge prometheus.Gauge, field func(*tracked) *bool, on bool) {
	mu.Lock()
	defer mu.Unlock()
	if _, ok := servers[uid]; !ok && !on {
		return // nothing to clear: no need to track it
	}
	t := get(uid)
	was := *field(t)
	countFlag(gauge, field(t), on)
	t.problemSeries(problem, was, "", on, "")
}

// countFlag counts a ModelServer in gauge if on, and not if not, as it
// was counted (*was), and remembers it there.
func countFlag(gauge prometheus.Gauge, was *bool, on bool) {
	switch {
	case on && !*was:
		gauge.Inc()
	case !on && *was:
		gauge.Dec()
	}
	*was = on
}

// recordCause moves uid to cause in gauge, in the field of its record that
// field names, and in its series of problem.
func recordCause(uid types.UID, problem string, gauge *prometheus.GaugeVec, field func(*tracked) *string, cause string) {
	mu.Lock()
	defer mu.Unlock()
	if _, ok := servers[uid]; !ok && cause == "" {
		return // nothing to clear: no need to track it
	}
	t := get(uid)
	was := *field(t)
	moveCause(gauge, field(t), cause)
	t.problemSeries(problem, was != "", was, cause != "", cause)
}

// Problems a ModelServer can have, as modelserver_problem's problem label
// says them: each is what one of the gauges counts.
const (
	ProblemStalledRollout      = "StalledRollout"
	ProblemStalledFetch        = "StalledFetch"
	ProblemSlowFetch           = "SlowFetch"
	ProblemInactiveAutoscaler  = "InactiveAutoscaler"
	ProblemAutoscalerAtMaximum = "AutoscalerAtMaximum"
	ProblemFailedRefresh       = "FailedRefresh"
)

// problemState is whether a ModelServer has a problem, and its cause
// ("" for the problems that have none).
type problemState struct {
	problem, cause string
	on             bool
}

func (t *tracked) problems() []problemState {
	return []problemState{
		{ProblemStalledRollout, t.stalled, t.stalled != ""},
		{ProblemStalledFetch, t.stalledFetch, t.stalledFetch != ""},
		{ProblemSlowFetch, t.slowFetch, t.slowFetch != ""},
		{ProblemInactiveAutoscaler, t.autoscaler, t.autoscaler != ""},
		{ProblemAutoscalerAtMaximum, "", t.atMaximum},
		{ProblemFailedRefresh, "", t.refreshFailed},
	}
}

// problemSeries moves the ModelServer's series of problem from how it was
// to how it is; none while its name is unknown.
func (t *tracked) problemSeries(problem string, wasOn bool, wasCause string, on bool, cause string) {
	if t.name == "" || wasOn == on && wasCause == cause {
		return
	}
	if wasOn {
		problemGauge.DeleteLabelValues(t.namespace, t.name, problem, wasCause)
	}
	if on {
		problemGauge.WithLabelValues(t.namespace, t.name, problem, cause).Set(1)
	}
}

// objective sets the ModelServer's series of an objective's gauge to v,
// from the value it had (*was), and remembers it there; 0 is none, and
// deletes the series.
func (t *tracked) objective(gauge *prometheus.GaugeVec, was *float64, v float64) {
	switch {
	case *was == v:
		return
	case v > 0:
		gauge.WithLabelValues(t.namespace, t.name).Set(v)
	default:
		gauge.DeleteLabelValues(t.namespace, t.name)
	}
	*was = v
}

// moveCause counts a ModelServer under cause in gauge, no more under the
// one it was counted under (*was), and remembers it there.
func moveCause(gauge *prometheus.GaugeVec, was *string, cause string) {
	if *was == cause {
		return
	}
	if *was != "" {
		gauge.WithLabelValues(*was).Dec()
	}
	if cause != "" {
		gauge.WithLabelValues(cause).Inc()
	}
	*was = cause
}

// Forget drops a ModelServer that is gone.
func Forget(uid types.UID) {
	mu.Lock()
	defer mu.Unlock()
	if t, ok := servers[uid]; ok {
		if t.phase != "" {
			phaseGauge.WithLabelValues(t.phase).Dec()
		}
		if t.series != nil {
			statusGauge.DeleteLabelValues(t.series...)
		}
		t.objective(latencyObjective, &t.latency, 0)
		t.objective(availabilityObjective, &t.availability, 0)
		t.objective(pausedSince, &t.paused, 0)
		for _, p := range t.problems() {
			t.problemSeries(p.problem, p.on, p.cause, false, "")
		}
		moveCause(stalledGauge, &t.stalled, "")
		moveCause(stalledFetchGauge, &t.stalledFetch, "")
		moveCause(slowFetchGauge, &t.slowFetch, "")
		moveCause(inactiveAutoscalerGauge, &t.autoscaler, "")
		countFlag(atMaximumGauge, &t.atMaximum, false)
		countFlag(failedRefreshGauge, &t.refreshFailed, false)
	}
	delete(servers, uid)
}

// FetchEnded records the end of a ModelServer's fetch Job once: its
// duration, and for a success the model's size and the bytes the fetch
// received (either < 0: not reported), for a failure its reason (failure;
// "" for a success).
func FetchEnded(uid, job types.UID, failure string, took time.Duration, bytes, received int64) {
	mu.Lock()
	defer mu.Unlock()
	t := get(uid)
	if _, done := t.fetches[job]; done {
		return
	}
	if t.fetches == nil {
		t.fetches = map[types.UID]struct{}{}
	}
	t.fetches[job] = struct{}{}
	result := ResultFailure
	if failure == "" {
		result = ResultSuccess
		if bytes >= 0 {
			fetchBytes.Add(float64(bytes))
			fetchModelBytes.Observe(float64(bytes))
		}
		if received >= 0 {
			fetchReceived.Add(float64(received))
		}
	} else {
		fetchFailures.WithLabelValues(failure).Inc()
	}
	fetchDuration.WithLabelValues(result).Observe(took.Seconds())
}
