package controllers

// Reporting: the status written once per reconcile, and the Events and
// metrics of what the reconcile saw happen.

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/metrics"
	"github.com/modelserver-dev/modelserver-operator/internal/status"
)

// writeStatus computes the status from what was observed and patches it
// if it changed, with an Event for each phase change worth one, and news
// of the release (nil: none) with the step it started. A step on the way
// to Ready may be held back; then it says when to look again.
func (r *ModelServerReconciler) writeStatus(ctx context.Context, ms *servingv1alpha1.ModelServer, old servingv1alpha1.ModelServerStatus, report status.Observation, obs *observed, news *releaseNews) (time.Duration, error) {
	now := r.clock().Now()
	st := status.Compute(old, report, now)
	started := st.Phase != old.Phase && onTheWay(st.Phase)
	if news != nil {
		note := sentence("%s", news.clause)
		if started {
			// One Event for the change and where it stands, rather than
			// a second for the phase it left Ready (or a failure) for.
			note = sentence("%s; the ModelServer is %s", news.clause, phaseWithMessage(st))
		}
		r.Recorder.Eventf(ms, nil, corev1.EventTypeNormal, news.reason, "Apply", "%s", note)
	}
	r.reportFetches(ms, report, obs, now)
	var wait time.Duration
	unchanged := equality.Semantic.DeepEqual(old, st)
	if unchanged {
		// A step held back and then undone is no longer waiting: the
		// next one is held from when it is first seen.
		r.held.forget(ms.UID)
	} else {
		atOnce := report.FetchPodsProblem != "" || report.PodsProblem != "" || obs != nil && obs.progressRead
		wait = r.held.hold(ms.UID, old, st, atOnce, now)
	}
	// The metrics say what the status says, held steps included.
	shown := &st
	if wait > 0 {
		shown = &old
	}
	seen := metrics.Seen{UID: ms.UID, Namespace: ms.Namespace, Name: ms.Name, Generation: ms.Generation,
		Phase: string(shown.Phase), Reason: status.Reason(*shown), Ready: shown.Phase == servingv1alpha1.PhaseReady}
	if ms.Generation == 1 {
		seen.ChangedAt = ms.CreationTimestamp.Time
	}
	if d := ms.Spec.Monitoring.P99Latency; d != nil {
		seen.P99Latency = d.Duration
	}
	// The schema admits only a percentage from 90 to 99.999.
	if percent, err := strconv.ParseFloat(ms.Spec.Monitoring.Availability, 64); err == nil {
		seen.Availability = percent / 100
	}
	if c := meta.FindStatusCondition(shown.Conditions, servingv1alpha1.ConditionPaused); c != nil && c.Status == metav1.ConditionTrue {
		seen.PausedSince = c.LastTransitionTime.Time
	}
	metrics.Observe(seen)
	metrics.RefreshFailed(ms.UID, refreshFailed(st))
	if unchanged {
		r.written.Store(ms.UID, st.DeepCopy())
		return 0, nil
	}
	if wait > 0 {
		return wait, nil
	}
	base := ms.DeepCopy()
	base.Status = old
	ms.Status = st
	if err := r.Status().Patch(ctx, ms, client.MergeFrom(base)); err != nil {
		r.written.Delete(ms.UID) // unknown now: trust the cache again
		return 0, client.IgnoreNotFound(err)
	}
	r.written.Store(ms.UID, st.DeepCopy())
	r.refreshEvents(ms, old, st)
	r.exposedEvents(ms, old, st)
	toggled := r.pauseEvents(ms, old, st)
	if st.Phase != old.Phase && phaseWorthAnEvent(old.Phase, st.Phase) && (news == nil || !started) && !toggled {
		kind := corev1.EventTypeNormal
		if st.Phase == servingv1alpha1.PhaseFailed || st.Phase == servingv1alpha1.PhaseDegraded {
			kind = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(ms, nil, kind, string(st.Phase), "Reconcile", "%s", phaseNote(old.Phase, st.Phase, st))
	}
	return 0, nil
}

// pauseEvents tells a ModelServer paused or resumed, and says whether it
// told either: the phase it left or reached with it is in that Event.
func (r *ModelServerReconciler) pauseEvents(ms *servingv1alpha1.ModelServer, old, st servingv1alpha1.ModelServerStatus) bool {
	was := meta.FindStatusCondition(old.Conditions, servingv1alpha1.ConditionPaused) != nil
	is := meta.FindStatusCondition(st.Conditions, servingv1alpha1.ConditionPaused) != nil
	switch {
	case is && !was:
		note := "Reconciliation paused by the annotation " + servingv1alpha1.AnnotationPaused + `: "true": no Helm operation, fetch or repair of the release's objects until it is removed`
		if st.Phase == servingv1alpha1.PhasePaused {
			note += "; " + st.Message
		}
		r.Recorder.Eventf(ms, nil, corev1.EventTypeNormal, servingv1alpha1.ReasonReconcilePaused, "Reconcile", "%s", sentence("%s", note))
	case was && !is:
		r.Recorder.Eventf(ms, nil, corev1.EventTypeNormal, eventReconcileResumed, "Reconcile", "%s",
			sentence("Reconciliation resumed; the ModelServer is %s", phaseWithMessage(st)))
	default:
		return false
	}
	return true
}

// eventReconcileResumed is the reason of the Event that tells a
// ModelServer's reconciliation resumed.
const eventReconcileResumed = "ReconcileResumed"

// phaseWithMessage is the status's phase, and its message if any.
func phaseWithMessage(st servingv1alpha1.ModelServerStatus) string {
	if st.Message == "" {
		return string(st.Phase)
	}
	return string(st.Phase) + ": " + st.Message
}

// progressHold is how long a step between two steps on the way to Ready
// (Fetching, Deploying) waits before it is written. Once the model is in
// place, serving pods that load it within that time pass their startup
// probe (every second) and are Ready, and one write says both the fetch
// done and Ready, where a write per step would cost one more per
// ModelServer. A slower start still shows as Deploying, 10 seconds late.
// A failure, what keeps pods from starting, a new generation and the
// release's own steps are written at once; Ready once it has lasted
// readyHold, or recoveryHold after an outage.
const progressHold = 10 * time.Second

// readyHold is how long a ModelServer whose pods were not all ready
// (Pending, Fetching, Deploying, or Degraded for want of them) waits,
// once they are, before it is written Ready. A kubelet can report a new
// container ready, then not ready, within a second (seen on 1.37.2), and
// the Deployment counts it (a restarted one is recoveryHold's). Without the
// hold, a new ModelServer could be written Ready on such a flash, and
// `kubectl wait --for=condition=Ready` return while no pod served. It is
// the serving Deployment's minReadySeconds, and costs no request: the
// requeue reads the cache. Ready is told this much later.
const readyHold = 2 * time.Second

// recoveryHold is how long a Degraded ModelServer whose pods were lost
// waits, once they are all ready again at the same generation, before it
// is written Ready. A pod lost without a new generation is mostly a
// container restarted in place. A kubelet since 1.35
// (ChangeContainerStatusOnKubeletRestart off) carries the old container's
// started state, and so its readiness, over to the new one
// (kubernetes#136047): the new container reads ready until its startup
// probe has run and the pod's status is synced again. That took 1.1 to
// 1.3 s on an idle node and over readyHold on a loaded one, which read
// Ready and Degraded again for a restart that never served. In 10 s the
// startup probe (every second) and the readiness probe (every 5 s) have
// run on the new container. A restored outage is told this much later; a
// new ModelServer and a rollout are not held longer, as their pods are
// new.
const recoveryHold = 10 * time.Second

// heldSteps remembers, by UID, which change of phase has been held, and
// since when.
type heldSteps struct{ m sync.Map }

type heldStep struct {
	to    servingv1alpha1.Phase
	since time.Time
}

// hold says how much longer st, a change from old seen at now, is held
// back; 0 to write it now. A status to be told at once (atOnce) is not
// held: one that names a fault (fetch or serving pods that cannot start),
// told with its Warning, and a fetch's progress just read from its pod's
// log, which a hold would only make older. A hold counts from when its
// phase was first seen: a step held, then Ready, holds Ready from then.
func (h *heldSteps) hold(uid types.UID, old, st servingv1alpha1.ModelServerStatus, atOnce bool, now time.Time) time.Duration {
	d := holdOf(old, st, atOnce)
	if d == 0 {
		h.m.Delete(uid)
		return 0
	}
	step := heldStep{to: st.Phase, since: now}
	if v, ok := h.m.Load(uid); ok && v.(heldStep).to == st.Phase {
		step = v.(heldStep)
	} else {
		h.m.Store(uid, step)
	}
	if left := step.since.Add(d).Sub(now); left > 0 {
		return left
	}
	h.m.Delete(uid)
	return 0
}

// holdOf is how long a change from old to st is held in all: Ready while
// the pods have not stayed ready long (longer after an outage), or a step
// on the way to Ready after another.
func holdOf(old, st servingv1alpha1.ModelServerStatus, atOnce bool) time.Duration {
	podsWereNotReady := old.Phase != servingv1alpha1.PhaseReady &&
		conditionStatus(old, servingv1alpha1.ConditionAvailable) != metav1.ConditionTrue
	switch {
	case st.Phase == servingv1alpha1.PhaseReady && podsWereNotReady:
		if old.Phase == servingv1alpha1.PhaseDegraded && old.ObservedGeneration == st.ObservedGeneration {
			return recoveryHold
		}
		return readyHold
	case old.ObservedGeneration != st.ObservedGeneration:
		return 0
	case !atOnce && onTheWay(old.Phase) && onTheWay(st.Phase) &&
		conditionStatus(old, servingv1alpha1.ConditionDeployed) == conditionStatus(st, servingv1alpha1.ConditionDeployed):
		return progressHold
	}
	return 0
}

func (h *heldSteps) forget(uid types.UID) { h.m.Delete(uid) }

func onTheWay(p servingv1alpha1.Phase) bool {
	return p == servingv1alpha1.PhaseFetching || p == servingv1alpha1.PhaseDeploying
}

func conditionStatus(st servingv1alpha1.ModelServerStatus, t string) metav1.ConditionStatus {
	if c := meta.FindStatusCondition(st.Conditions, t); c != nil {
		return c.Status
	}
	return ""
}

// phaseWorthAnEvent says whether a change of phase is announced: reaching
// Ready, Failed or Degraded, and leaving them. The steps on the way to
// Ready (Pending, Fetching, Deploying) are in the status; an Event for
// each would be one more write per step and ModelServer, and no news to
// anyone who waits for Ready. Leaving Ready for such a step because of a
// release's change is told in that change's Event.
func phaseWorthAnEvent(from, to servingv1alpha1.Phase) bool {
	settled := func(p servingv1alpha1.Phase) bool {
		return p == servingv1alpha1.PhaseReady || p == servingv1alpha1.PhaseFailed || p == servingv1alpha1.PhaseDegraded
	}
	return settled(from) || settled(to)
}

// reportFetches counts each fetch that ended in the metrics. A fetch that
// succeeded has no Event of its own: the status holds its digest, size and
// versions, and the Ready Event that follows names them.
//
// A running fetch that, at the rate it last logged, does not finish
// within its timeout has a Warning, once per Job and timeout: raised now,
// the timeout applies to that fetch, which need not fail first.
func (r *ModelServerReconciler) reportFetches(ms *servingv1alpha1.ModelServer, report status.Observation, obs *observed, now time.Time) {
	if obs == nil {
		return
	}
	if i := slices.IndexFunc(report.Models, func(m status.ModelFetch) bool { return m.OutOfTime > 0 }); i >= 0 {
		m := report.Models[i]
		r.warn(ms, eventFetchOutOfTime, "Fetch", sentence("Model-fetch Job %s will not finish within spec.fetch.timeout, %s, at the rate it fetches: raise it, and the running fetch is given the time", m.FetchJob, m.OutOfTime))
	} else {
		r.problems.resolved(ms.UID, eventFetchOutOfTime)
	}
	metrics.SlowFetch(ms.UID, status.SlowFetch(report))
	for _, m := range report.Models {
		fj := obs.FetchJobs[m.FetchJob]
		switch {
		case fj == nil:
		case m.NewlyFetched:
			metrics.FetchEnded(ms.UID, fj.Job.UID, "", jobDuration(fj.Job, now), m.Status.SizeBytes, m.Received)
		case status.FetchStateOf(fj.Job) == status.FetchFailed:
			metrics.FetchEnded(ms.UID, fj.Job.UID, cmp.Or(m.Reason, servingv1alpha1.ReasonFetchFailed), jobDuration(fj.Job, now), -1, -1)
		}
	}
}

// eventFetchOutOfTime is the reason of the Warning that says a running
// fetch will not finish within its timeout at the rate it fetches.
const eventFetchOutOfTime = "FetchOutOfTime"

// jobDuration is how long a finished Job ran, as of now.
func jobDuration(job *batchv1.Job, now time.Time) time.Duration {
	if job.Status.StartTime == nil {
		return 0
	}
	end := now
	if job.Status.CompletionTime != nil {
		end = job.Status.CompletionTime.Time
	}
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			end = c.LastTransitionTime.Time
		}
	}
	return end.Sub(job.Status.StartTime.Time)
}
