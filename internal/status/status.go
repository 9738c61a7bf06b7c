// Package status turns what the operator observed of a ModelServer into its
// status: phase, conditions, replica counts, endpoints and a message. It is
// pure: no cluster, no clock (the time is passed in), so its tables run in
// the unit tests.
package status

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/clip"
	"github.com/modelserver-dev/modelserver-operator/internal/fetch"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// FetchState is what the model-fetch Job of the current generation says.
type FetchState string

// The states of a fetch.
const (
	FetchMissing   FetchState = "Missing"
	FetchRunning   FetchState = "Running"
	FetchSucceeded FetchState = "Succeeded"
	FetchFailed    FetchState = "Failed"
)

// Observation is everything the status is computed from. Gathering it is
// the reconciler's job; turning it into a status is computeStatus's.
type Observation struct {
	Generation int64
	// Blocked, if set, is a problem with the spec or its surroundings that
	// stops the operator before Helm: its reason and message.
	BlockedReason, BlockedMessage string
	// ReleaseErr is the error of the Helm operation of this reconcile.
	ReleaseErr error
	Conflict   bool
	Release    *servingv1alpha1.ReleaseStatus
	// ReleaseCurrent says the release is deployed with the current digest.
	ReleaseCurrent bool
	// Paused says reconciliation is paused (AnnotationPaused); Waiting,
	// then, is what the operator would do and does not ("" for nothing):
	// the release's change, why it would make it.
	Paused  bool
	Waiting string

	// Source is the spec field the models come from. From spec.models,
	// the status lists them in status.models and messages name each one;
	// from spec.model, status.model holds the one model.
	Source values.Source
	// Models are the fetches of each model, in spec order.
	Models []ModelFetch
	// Fetch sums up the models' fetches: Failed if any failed, Succeeded
	// if all succeeded, else Running or Missing; with the first failure's
	// reason and message.
	Fetch        FetchState
	FetchReason  string
	FetchMessage string
	// FetchPodsProblem is what model-fetch pods that have stood unstarted
	// for a while say keeps them from starting (FetchPodsProblem).
	FetchPodsProblem string
	// Serving says some model has data to serve.
	Serving bool
	// Warnings are parts of the spec that could not be honoured, such as
	// routes of an API the cluster does not have.
	Warnings []string
	// AutoscalerProblem is what keeps the autoscaler from scaling, once
	// it has lasted (AutoscalerProblem): a warning of spec.autoscaling.
	AutoscalerProblem string
	// AutoscalerLimit says the autoscaler has wanted more pods than its
	// maximum for a while (AutoscalerAtMaximum): a warning of
	// spec.autoscaling too.
	AutoscalerLimit string

	Deployment *appsv1.Deployment
	// DesiredReplicas is the number of serving pods wanted: the spec's,
	// or under an autoscaler the count it chose.
	DesiredReplicas int32
	// NeededReplicas is how many ready pods make the ModelServer Ready:
	// the spec's replicas, or its autoscaler's minimum. Pods an autoscaler
	// adds are capacity, not a deployment, and its scale leaves the
	// ModelServer Ready.
	NeededReplicas int32
	// RollUnavailable is how many of the needed pods a rollout may take
	// down (spec.rollout.maxUnavailable): a roll onto a refreshed model
	// with no fewer ready keeps the ModelServer Ready.
	RollUnavailable int32
	// ScaledOnly says the Deployment's controller has not seen its latest
	// generation, but its pod template is the one that controller had
	// seen: the change is an autoscaler's count.
	ScaledOnly bool
	// PodsProblem is what the serving pods say keeps them from being
	// ready (ServingPodsProblem), read once their rollout has stalled.
	PodsProblem string
	Selector    string
	Endpoints   *servingv1alpha1.Endpoints
}

// ModelFetch is what one model's fetch Job says.
type ModelFetch struct {
	Name string
	// Field names the model in the spec: spec.model or spec.models[i].
	Field string
	// FetchJob names the Job of the model's current fetch generation.
	FetchJob string
	State    FetchState
	// Reason and Message of a failure, e.g. NotFound.
	Reason, Message string
	// StorageURI is where the model is fetched from, redacted.
	StorageURI string
	// Retries counts the fetch pods that failed and were retried.
	Retries int32
	// Left is how long the running fetch needs yet at the rate it last
	// logged; 0 where that is not known. OutOfTime, if set, is its Job's
	// timeout, which it does not finish within at that rate.
	Left, OutOfTime time.Duration
	// Status is the model's status: what was fetched and is served.
	Status servingv1alpha1.ModelStatus
	// NewlyFetched says this observation is the first to see the fetch of
	// the model's current generation succeed: news worth an Event.
	NewlyFetched bool
	// Received is, for a fetch newly seen to succeed, the bytes it
	// received from the store as its summary says (fetch.Summary); -1
	// where that is not known.
	Received int64
	// NewlyFailed says this observation is the first to see the fetch of
	// the model's current generation (or round) fail.
	NewlyFailed bool
	// Refreshing says the fetch is a refresh round's, in the background
	// of the copy served: its state is the refresh's (Status.Refresh),
	// and neither keeps the ModelServer from Ready nor fails it.
	Refreshing bool
}

// Served maps each model with data to the generation it is served from.
func Served(fetches []ModelFetch) map[string]string {
	served := map[string]string{}
	for _, m := range fetches {
		if from := servedFrom(m.Status); from != "" {
			served[m.Name] = from
		}
	}
	return served
}

// Pins maps each served generation whose fetch found a digest to what
// it found, which the serving pods' own copies must be (storage mode
// PerPod). A generation served for being the same model as the one
// fetched since has that model's digest.
func Pins(fetches []ModelFetch) map[string]values.Pin {
	pins := map[string]values.Pin{}
	for _, m := range fetches {
		if from := servedFrom(m.Status); from != "" && m.Status.Digest != "" {
			pins[from] = values.Pin{Digest: m.Status.Digest, Image: m.Status.ResolvedImage, Versions: m.Status.Versions}
		}
	}
	return pins
}

// FailedFetches holds the models whose current fetch failed, which the
// serving pods must not wait for.
func FailedFetches(fetches []ModelFetch) map[string]bool {
	failed := map[string]bool{}
	for _, m := range fetches {
		if m.State == FetchFailed && !m.Refreshing {
			failed[m.Name] = true
		}
	}
	return failed
}

// FetchJobsCreated counts the fetches whose Job the cache does not show
// yet as running: the release has just been applied and created them.
func (o *Observation) FetchJobsCreated() {
	for i := range o.Models {
		m := &o.Models[i]
		switch {
		case m.State != FetchMissing:
		case m.Refreshing:
			m.State, m.Status.Refresh.State = FetchRunning, servingv1alpha1.RefreshRunning
		default:
			m.State, m.Status.Fetch = FetchRunning, string(FetchRunning)
		}
	}
	o.SummarizeFetches()
}

// SummarizeFetches sums the models' fetches up into Fetch, FetchReason,
// FetchMessage and Serving.
func (o *Observation) SummarizeFetches() {
	o.Fetch, o.FetchReason, o.FetchMessage, o.Serving = FetchSucceeded, "", "", false
	for _, m := range o.Models {
		o.Serving = o.Serving || m.Status.FetchedGeneration != ""
		switch {
		case m.Refreshing:
			// In the background: the copy served was fetched.
		case m.State == FetchFailed && o.Fetch != FetchFailed:
			o.Fetch, o.FetchReason, o.FetchMessage = FetchFailed, m.Reason, m.Message
			if o.Source == values.SourceModels {
				o.FetchMessage = "model " + m.Name + ": " + m.Message
			}
		case m.State == FetchRunning && o.Fetch != FetchFailed:
			o.Fetch = FetchRunning
		case m.State == FetchMissing && o.Fetch == FetchSucceeded:
			o.Fetch = FetchMissing
		}
	}
}

// Compute derives the whole status from an observation made at now. It
// keeps the conditions' transition times from old where their status is
// unchanged.
func Compute(old servingv1alpha1.ModelServerStatus, o Observation, now time.Time) servingv1alpha1.ModelServerStatus {
	st := servingv1alpha1.ModelServerStatus{
		Conditions:         append([]metav1.Condition(nil), old.Conditions...),
		ObservedGeneration: o.Generation,
		Replicas:           o.DesiredReplicas,
		Selector:           o.Selector,
		Release:            o.Release,
		Endpoints:          o.Endpoints,
		Warnings:           o.Warnings,
	}
	if w := refreshWarnings(o); len(w) > 0 {
		st.Warnings = append(slices.Clip(st.Warnings), w...)
	}
	for _, w := range []string{o.AutoscalerProblem, o.AutoscalerLimit} {
		if w != "" {
			st.Warnings = append(slices.Clip(st.Warnings), oneLine("spec.autoscaling: "+w))
		}
	}
	var modelNames []string
	for _, m := range o.Models {
		st.Models = append(st.Models, *m.Status.DeepCopy())
		modelNames = append(modelNames, m.Name)
	}
	st.ModelNames = strings.Join(modelNames, ",")
	if o.Source != values.SourceModels && len(st.Models) == 1 {
		st.Model, st.Models = &st.Models[0], nil
	}
	if st.Release == nil {
		st.Release = old.Release
	}
	if d := o.Deployment; d != nil {
		st.ReadyReplicas = d.Status.ReadyReplicas
	}
	st.Ready = fmt.Sprintf("%d/%d", st.ReadyReplicas, st.Replicas)
	set := func(t string, v verdict) {
		status := metav1.ConditionFalse
		if v.ok {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: t, Status: status, Reason: v.reason, Message: v.message, ObservedGeneration: o.Generation,
		})
	}

	fetched, deployed, available := fetchedCondition(o), deployedCondition(o, st.Release), availability(o, refreshRoll(old, o))
	set(servingv1alpha1.ConditionModelFetched, fetched)
	set(servingv1alpha1.ConditionDeployed, deployed)
	set(servingv1alpha1.ConditionAvailable, available)
	if o.Paused {
		set(servingv1alpha1.ConditionPaused, verdict{true, servingv1alpha1.ReasonReconcilePaused, pausedMessage})
	} else {
		meta.RemoveStatusCondition(&st.Conditions, servingv1alpha1.ConditionPaused)
	}
	ready := fetched.ok && deployed.ok && available.ok
	phase, msg := phaseOf(o, old.Phase, st.ReadyReplicas, deployed.ok, available)
	st.Phase, st.Message = phase, msg
	if ready {
		set(servingv1alpha1.ConditionReady, verdict{true, servingv1alpha1.ReasonReady, "the model is being served"})
	} else {
		set(servingv1alpha1.ConditionReady, verdict{false, servingv1alpha1.ReasonNotReady, msg})
	}
	return st
}

// fetchedCondition is the ModelFetched condition: its status, reason and
// message.
func fetchedCondition(o Observation) verdict {
	switch o.Fetch {
	case FetchSucceeded:
		return verdict{true, servingv1alpha1.ReasonFetched, fetchedMessage(o)}
	case FetchFailed:
		return verdict{false, o.FetchReason, o.FetchMessage}
	}
	if o.Paused && o.Fetch == FetchMissing {
		return verdict{false, servingv1alpha1.ReasonReconcilePaused, "no model-fetch Job is made while reconciliation is paused"}
	}
	msg := "the model-fetch Job is running"
	if o.FetchPodsProblem != "" {
		msg += "; " + o.FetchPodsProblem
	}
	return verdict{false, servingv1alpha1.ReasonFetching, msg}
}

// deployedCondition is the Deployed condition, rel the release the status
// reports.
func deployedCondition(o Observation, rel *servingv1alpha1.ReleaseStatus) verdict {
	switch {
	case o.BlockedReason != "":
		return verdict{false, o.BlockedReason, o.BlockedMessage}
	case o.Conflict:
		return verdict{false, servingv1alpha1.ReasonConflict, ErrorLine(o.ReleaseErr)}
	case o.ReleaseErr != nil:
		return verdict{false, servingv1alpha1.ReasonReleaseFailed, ErrorLine(o.ReleaseErr)}
	case o.ReleaseCurrent && rel != nil:
		return verdict{true, servingv1alpha1.ReasonReleaseDeployed, fmt.Sprintf("release %s revision %d is deployed", rel.Name, rel.Revision)}
	case o.Paused:
		return verdict{false, servingv1alpha1.ReasonReconcilePaused, waitingMessage(o, rel)}
	}
	return verdict{false, servingv1alpha1.ReasonReleasePending, "the release is being installed"}
}

// pausedMessage is the Paused condition's message.
const pausedMessage = "reconciliation is paused by the annotation " + servingv1alpha1.AnnotationPaused + `: "true"; remove it to resume`

// waitingMessage says what waits for a paused ModelServer to resume, with
// the release that stays (rel; nil: not named).
func waitingMessage(o Observation, rel *servingv1alpha1.ReleaseStatus) string {
	msg := "reconciliation is paused: " + cmp.Or(o.Waiting, "the release's change") + " waits for it to resume"
	if rel != nil {
		msg += fmt.Sprintf("; release %s stays at revision %d", rel.Name, rel.Revision)
	}
	return msg
}

// verdict is what a condition says: its status, reason and message.
type verdict struct {
	ok              bool
	reason, message string
}

// phaseOf is the phase and, when not Ready, the message saying which step
// is pending or failed and why: the first that is, in the order a
// ModelServer goes through them.
func phaseOf(o Observation, was servingv1alpha1.Phase, readyReplicas int32, deployed bool, available verdict) (servingv1alpha1.Phase, string) {
	switch {
	case o.Fetch == FetchSucceeded && deployed && available.ok:
		return servingv1alpha1.PhaseReady, ""
	case o.BlockedReason != "":
		return servingv1alpha1.PhaseFailed, o.BlockedMessage
	case o.Conflict || o.ReleaseErr != nil:
		return servingv1alpha1.PhaseFailed, "Helm release: " + ErrorLine(o.ReleaseErr)
	case o.Fetch == FetchFailed && o.Serving && readyReplicas > 0:
		return servingv1alpha1.PhaseDegraded, fmt.Sprintf("model fetch failed (%s): %s; still serving the previously fetched model", o.FetchReason, o.FetchMessage)
	case o.Fetch == FetchFailed:
		return servingv1alpha1.PhaseFailed, fmt.Sprintf("model fetch failed (%s): %s", o.FetchReason, o.FetchMessage)
	case o.Paused && available.reason == servingv1alpha1.ReasonPodsNotReady && wasServing(was):
		// An outage is one, paused or not: the alerts watch Degraded.
		return servingv1alpha1.PhaseDegraded, available.message
	case o.Paused && (!deployed || o.Fetch == FetchMissing):
		return servingv1alpha1.PhasePaused, waitingMessage(o, nil)
	case o.Fetch != FetchSucceeded:
		return servingv1alpha1.PhaseFetching, fetchProgress(o)
	case !deployed:
		return servingv1alpha1.PhaseDeploying, "installing the Helm release"
	case available.reason == servingv1alpha1.ReasonPodsNotReady && wasServing(was):
		// Every pod lost is an outage, not a deployment in progress: a
		// Warning, and the phase alerts watch.
		return servingv1alpha1.PhaseDegraded, available.message
	}
	return servingv1alpha1.PhaseDeploying, available.message
}

// Reason is the reason of the condition that decides a status's phase, as
// phaseOf takes them: a spec, Secret or release refused (Deployed), else a
// fetch not done (ModelFetched, whose reason says why a failed one
// failed), else a release not yet deployed, else the pods (Available);
// Ready when all hold. "" for a status with no conditions yet.
func Reason(st servingv1alpha1.ModelServerStatus) string {
	deployed := meta.FindStatusCondition(st.Conditions, servingv1alpha1.ConditionDeployed)
	pending := func(c *metav1.Condition) bool { return c != nil && c.Status != metav1.ConditionTrue }
	available := meta.FindStatusCondition(st.Conditions, servingv1alpha1.ConditionAvailable)
	paused := meta.FindStatusCondition(st.Conditions, servingv1alpha1.ConditionPaused) != nil
	if paused && st.Phase == servingv1alpha1.PhaseDegraded && pending(available) && available.Reason == servingv1alpha1.ReasonPodsNotReady {
		// Pods lost while paused: the outage, not what waits (phaseOf).
		return available.Reason
	}
	switch fetched := meta.FindStatusCondition(st.Conditions, servingv1alpha1.ConditionModelFetched); {
	case pending(deployed) && deployed.Reason != servingv1alpha1.ReasonReleasePending:
		return deployed.Reason
	case pending(fetched):
		return fetched.Reason
	case pending(deployed):
		return deployed.Reason
	}
	if pending(available) {
		return available.Reason
	}
	if ready := meta.FindStatusCondition(st.Conditions, servingv1alpha1.ConditionReady); ready != nil {
		return ready.Reason
	}
	return ""
}

// wasServing says the ModelServer had been Ready, so that pods lost now
// make it Degraded rather than still Deploying.
func wasServing(p servingv1alpha1.Phase) bool {
	return p == servingv1alpha1.PhaseReady || p == servingv1alpha1.PhaseDegraded
}

// availability is the Available condition: the rollout of the current pod
// template is complete and the needed number of pods pass the readiness
// probe. A Deployment changed since its controller last saw it is not yet
// known to be, unless the change is an autoscaler's scale (ScaledOnly):
// until its controller sees it, it is judged by the status it has, which
// is seen again in a moment. Without that, each scale of an autoscaler
// would take the ModelServer out of Ready and back, with an Event each
// way.
//
// A roll onto what a refresh round fetched (refreshRoll) leaves it
// Available while the pods needed are ready, but for those the rollout
// may take down (RollUnavailable), and nothing is known to stop the roll:
// the old pods serve until new ones are ready.
func availability(o Observation, refreshRoll bool) verdict {
	d := o.Deployment
	want, need := o.DesiredReplicas, cmp.Or(o.NeededReplicas, o.DesiredReplicas)
	servedThroughRoll := func() (verdict, bool) {
		if !refreshRoll || d.Status.ReadyReplicas < max(need-o.RollUnavailable, 1) || withProblem("", o) != "" {
			return verdict{}, false
		}
		return verdict{true, servingv1alpha1.ReasonRollingOntoRefreshedModel, fmt.Sprintf("rolling the pods onto the refreshed model: %d of %d updated, %d ready",
			d.Status.UpdatedReplicas, want, d.Status.ReadyReplicas)}, true
	}
	switch {
	case !o.Serving:
		return verdict{false, servingv1alpha1.ReasonWaitingForFetch, "serving pods start once the model is fetched"}
	case d == nil:
		return verdict{false, servingv1alpha1.ReasonRollingOut, "the Deployment does not exist yet"}
	case d.Status.ObservedGeneration < d.Generation && !o.ScaledOnly:
		if v, ok := servedThroughRoll(); ok {
			return v
		}
		return verdict{false, servingv1alpha1.ReasonRollingOut, "the Deployment controller has not seen the latest pod template yet"}
	}
	if d.Spec.Replicas != nil && *d.Spec.Replicas != want {
		return verdict{false, servingv1alpha1.ReasonRollingOut, fmt.Sprintf("the Deployment is being scaled to %d replicas", want)}
	}
	if d.Status.UpdatedReplicas < need || d.Status.Replicas > d.Status.UpdatedReplicas {
		if v, ok := servedThroughRoll(); ok {
			return v
		}
		return verdict{false, servingv1alpha1.ReasonRollingOut, withProblem(fmt.Sprintf("rolling out: %d of %d pods updated", d.Status.UpdatedReplicas, want), o)}
	}
	ready := fmt.Sprintf("%d of %d serving pods ready", d.Status.ReadyReplicas, want)
	if need < want {
		ready += fmt.Sprintf(", at least %d needed by spec.autoscaling.minReplicas", need)
	}
	if d.Status.ReadyReplicas < need {
		return verdict{false, servingv1alpha1.ReasonPodsNotReady, withProblem(ready+" (readiness probe GET /v1/models/<name>)", o)}
	}
	if d.Status.ReadyReplicas < want {
		// An autoscaler's pods still starting, or kept from it: capacity
		// short of its count, which the message tells.
		ready = withProblem(ready, o)
	}
	return verdict{true, servingv1alpha1.ReasonAvailable, ready}
}

// withProblem adds to a rollout's progress what stops it, if known: from
// the Deployment's conditions, and from its pods.
func withProblem(message string, o Observation) string {
	if p := RolloutProblem(o.Deployment); p != "" {
		message += "; " + p
	}
	if o.PodsProblem != "" {
		message += "; " + o.PodsProblem
	}
	return message
}

// forbiddenPod is how the apiserver names the pod it refused: a name the
// ReplicaSet generated for that attempt, different at every retry.
var forbiddenPod = regexp.MustCompile(`^pods? "[^"]*" is forbidden: `)

// RolloutProblem is what the Deployment's own conditions say stops its
// rollout, or "": pods that cannot be created (a ResourceQuota, Pod
// Security admission, a missing ServiceAccount: the ReplicaSet's error,
// which the Deployment carries as ReplicaFailure), or no progress within
// its progress deadline. Without it the status would show only a count of
// pods that never grows. It is read from the cached Deployment: no request.
// The refused pod's generated name is left out, so that retries do not
// change the message.
func RolloutProblem(d *appsv1.Deployment) string {
	if d == nil {
		return ""
	}
	if c := replicaFailure(d); c != nil {
		return "serving pods cannot be created: " + oneLine(forbiddenPod.ReplaceAllString(strings.TrimSpace(c.Message), ""))
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
			deadline := ""
			if d.Spec.ProgressDeadlineSeconds != nil {
				deadline = fmt.Sprintf(" (%d s)", *d.Spec.ProgressDeadlineSeconds)
			}
			return "the rollout made no progress within the Deployment's progress deadline" + deadline +
				": see the serving pods' events (kubectl describe pods)"
		}
	}
	return ""
}

// replicaFailure is the Deployment's condition saying that the apiserver
// refuses its new pods, or nil.
func replicaFailure(d *appsv1.Deployment) *appsv1.DeploymentCondition {
	for i, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

func fetchedMessage(o Observation) string {
	if o.Source == values.SourceModels {
		return fmt.Sprintf("the model-fetch Jobs of all %d models succeeded", len(o.Models))
	}
	return "the model-fetch Job succeeded"
}

// fetchProgress says how the running fetches are going, for
// status.message: one clause per model still being fetched, then what
// keeps fetch pods from starting, if that is known.
func fetchProgress(o Observation) string {
	var parts []string
	for _, m := range o.Models {
		if m.State == FetchSucceeded || m.Refreshing {
			continue
		}
		msg := "fetching the model"
		if o.Source == values.SourceModels {
			msg = "fetching model " + m.Name
		}
		if m.StorageURI != "" {
			msg += " from " + m.StorageURI
		}
		if m.Status.FetchedGeneration != "" {
			msg += " (still serving the previously fetched model)"
		}
		if p := m.Status.Progress; p != nil {
			msg += ": " + progressClause(p) + outlookClause(m)
		}
		// No time in the message: one that changed with the clock, or
		// when the Job's pod starts, would cost a status write each time;
		// the ModelFetched condition's transition time says since when.
		// The progress changes only as often as it is read.
		switch {
		case m.Retries == 1:
			msg += ", 1 failed attempt retried"
		case m.Retries > 1:
			msg += fmt.Sprintf(", %d failed attempts retried", m.Retries)
		}
		parts = append(parts, msg)
	}
	if o.FetchPodsProblem != "" {
		parts = append(parts, o.FetchPodsProblem)
	}
	return strings.Join(parts, "; ")
}

// progressClause says how far a fetch has come: "1.2 GiB of 4.0 GiB
// (30%), 38.5 MB/s".
func progressClause(p *servingv1alpha1.FetchProgress) string {
	msg := fetch.FormatBytes(p.Bytes) + " so far"
	if p.TotalBytes != nil && *p.TotalBytes > 0 {
		msg = fmt.Sprintf("%s of %s (%d%%)", fetch.FormatBytes(p.Bytes), fetch.FormatBytes(*p.TotalBytes), min(p.Bytes*100 / *p.TotalBytes, 100))
	}
	if p.BytesPerSecond > 0 {
		msg += fmt.Sprintf(", %.1f MB/s", float64(p.BytesPerSecond)/1e6)
	}
	if standingStill(p) {
		msg += ", nothing received for " + roughly(time.Duration(p.IdleSeconds)*time.Second)
	}
	return msg
}

// standingStill says a fetch has received nothing for idleWorthSaying.
func standingStill(p *servingv1alpha1.FetchProgress) bool {
	return p != nil && time.Duration(p.IdleSeconds)*time.Second >= idleWorthSaying
}

// The causes of a slow fetch (SlowFetch).
const (
	SlowFetchOutOfTime       = "OutOfTime"
	SlowFetchNothingReceived = "NothingReceived"
)

// SlowFetchCauses are all of them, for a gauge to show each from the
// start.
var SlowFetchCauses = []string{SlowFetchOutOfTime, SlowFetchNothingReceived}

// SlowFetch is why a running fetch of the observed models is slow, as its
// pod's log last said: it will not finish within its timeout at its rate,
// or it has received nothing for idleWorthSaying; "" if neither.
func SlowFetch(o Observation) string {
	cause := ""
	for _, m := range o.Models {
		switch {
		case m.State != FetchRunning:
		case m.OutOfTime > 0:
			return SlowFetchOutOfTime
		case standingStill(m.Status.Progress):
			cause = SlowFetchNothingReceived
		}
	}
	return cause
}

// idleWorthSaying is how long a fetch may receive nothing before its
// progress says so: longer than a store's pause between a listing and the
// first bytes, and than the fetcher's first retries.
const idleWorthSaying = 30 * time.Second

// outlookClause says how long a running fetch needs yet, and whether its
// timeout stops it first: ", about 12 min left".
func outlookClause(m ModelFetch) string {
	msg := leftClause(m.Left)
	if msg != "" && m.OutOfTime > 0 {
		msg += fmt.Sprintf(", past spec.fetch.timeout, %s, at this rate; raise it, and the running fetch is given the time", m.OutOfTime)
	}
	return msg
}

// leftClause says how long a fetch needs yet, if known: ", about 12 min
// left".
func leftClause(left time.Duration) string {
	switch {
	case left <= 0:
		return ""
	case left < time.Minute:
		return ", less than a minute left"
	}
	return ", about " + roughly(left) + " left"
}

// roughly is d to the second under a minute, else to the minute: "45 s",
// "12 min", "2h10m", "3h".
func roughly(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%d s", d/time.Second)
	}
	d = d.Round(time.Minute)
	h, m := d/time.Hour, d%time.Hour/time.Minute
	switch {
	case h == 0:
		return fmt.Sprintf("%d min", m)
	case m == 0:
		return fmt.Sprintf("%dh", h)
	}
	return fmt.Sprintf("%dh%dm", h, m)
}

// FetchStateOf reads a Job's outcome from its conditions.
func FetchStateOf(job *batchv1.Job) FetchState {
	if job == nil {
		return FetchMissing
	}
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete, batchv1.JobSuccessCriteriaMet:
			return FetchSucceeded
		case batchv1.JobFailed, batchv1.JobFailureTarget:
			return FetchFailed
		}
	}
	return FetchRunning
}

// ErrorLine shortens an error to one line for a condition message.
func ErrorLine(err error) string {
	if err == nil {
		return ""
	}
	return oneLine(err.Error())
}

// oneLine is msg on one line, at most 1024 bytes of it.
func oneLine(msg string) string {
	return clip.To(strings.ReplaceAll(msg, "\n", " "), 1024)
}
