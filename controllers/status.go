package controllers

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// Condition reasons. They are the API: the troubleshooting guide is keyed
// by them.
const (
	ReasonInvalidSpec     = "InvalidSpec"
	ReasonSecretNotFound  = "SecretNotFound"
	ReasonConflict        = "Conflict"
	ReasonReleaseFailed   = "ReleaseFailed"
	ReasonReleaseDeployed = "ReleaseDeployed"
	ReasonReleasePending  = "ReleasePending"
	ReasonFetching        = "Fetching"
	ReasonFetchFailed     = "FetchFailed"
	// ReasonFetchPodRejected: the apiserver refuses the fetch Job's pod.
	ReasonFetchPodRejected = "FetchPodRejected"
	// ReasonInvalidSecret: the credentials Secret lacks the keys the
	// storage URI's scheme needs.
	ReasonInvalidSecret   = "InvalidSecret"
	ReasonFetched         = "Fetched"
	ReasonWaitingForFetch = "WaitingForFetch"
	ReasonRollingOut      = "RollingOut"
	ReasonPodsNotReady    = "PodsNotReady"
	ReasonAvailable       = "MinimumReplicasReady"
	ReasonReady           = "Ready"
	ReasonNotReady        = "NotReady"
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

	// JobImages maps a fetch generation whose Job exists to its image.
	JobImages map[string]string

	// Multi says the models come from spec.models, not spec.model.
	Multi bool
	// Models are the fetches of each model, in spec order.
	Models []ModelFetch
	// Fetch sums up the models' fetches: Failed if any failed, Succeeded
	// if all succeeded, else Running or Missing; with the first failure's
	// reason and message.
	Fetch        FetchState
	FetchReason  string
	FetchMessage string
	// FetchPodRejected says the apiserver refuses a fetch Job's pod.
	FetchPodRejected bool
	// LookAgainIn, if set, is when a fetch Job still without a pod is
	// looked into.
	LookAgainIn time.Duration
	// Serving says some model has data to serve.
	Serving bool
	// Warnings are parts of the spec that could not be honoured, such as
	// routes of an API the cluster does not have.
	Warnings []string

	Deployment      *appsv1.Deployment
	DesiredReplicas int32
	Selector        string
	Endpoints       *servingv1alpha1.Endpoints
}

// ModelFetch is what one model's fetch Job says.
type ModelFetch struct {
	Name  string
	State FetchState
	// Reason and Message of a failure, e.g. NotFound.
	Reason, Message string
	// StorageURI is where the model is fetched from, redacted.
	StorageURI string
	// Elapsed is how long the running fetch has been going, rounded down
	// to the minute so that the status changes at most once a minute.
	Elapsed time.Duration
	// Retries counts the fetch pods that failed and were retried.
	Retries int32
	// Status is the model's status: what was fetched and is served.
	Status servingv1alpha1.ModelStatus
}

// Served maps each model with data to the generation it is served from.
func (o *Observation) Served() map[string]string {
	served := map[string]string{}
	for _, m := range o.Models {
		if m.Status.FetchedGeneration != "" {
			served[m.Name] = m.Status.FetchedGeneration
		}
	}
	return served
}

// FailedFetches holds the models whose current fetch failed, which the
// serving pods must not wait for.
func (o *Observation) FailedFetches() map[string]bool {
	failed := map[string]bool{}
	for _, m := range o.Models {
		if m.State == FetchFailed {
			failed[m.Name] = true
		}
	}
	return failed
}

// fetchJobsCreated counts the fetches whose Job the cache does not show
// yet as running: the release has just been applied and created them.
func (o *Observation) fetchJobsCreated() {
	for i := range o.Models {
		if m := &o.Models[i]; m.State == FetchMissing {
			m.State, m.Status.Fetch = FetchRunning, string(FetchRunning)
		}
	}
	o.summarizeFetches()
}

// summarizeFetches sums the models' fetches up into Fetch, FetchReason,
// FetchMessage and Serving.
func (o *Observation) summarizeFetches() {
	o.Fetch, o.FetchReason, o.FetchMessage, o.Serving = FetchSucceeded, "", "", false
	for _, m := range o.Models {
		o.Serving = o.Serving || m.Status.FetchedGeneration != ""
		switch {
		case m.State == FetchFailed && o.Fetch != FetchFailed:
			o.Fetch, o.FetchReason, o.FetchMessage = FetchFailed, m.Reason, m.Message
			if o.Multi {
				o.FetchMessage = "model " + m.Name + ": " + m.Message
			}
		case m.State == FetchRunning && o.Fetch != FetchFailed:
			o.Fetch = FetchRunning
		case m.State == FetchMissing && o.Fetch == FetchSucceeded:
			o.Fetch = FetchMissing
		}
	}
}

// computeStatus derives the whole status from an observation. It keeps the
// conditions' transition times from old where their status is unchanged.
func computeStatus(old servingv1alpha1.ModelServerStatus, o Observation) servingv1alpha1.ModelServerStatus {
	st := servingv1alpha1.ModelServerStatus{
		Conditions:         append([]metav1.Condition(nil), old.Conditions...),
		ObservedGeneration: o.Generation,
		Replicas:           o.DesiredReplicas,
		Selector:           o.Selector,
		Release:            o.Release,
		Endpoints:          o.Endpoints,
		Warnings:           o.Warnings,
	}
	var modelNames []string
	for _, m := range o.Models {
		st.Models = append(st.Models, *m.Status.DeepCopy())
		modelNames = append(modelNames, m.Name)
	}
	st.ModelNames = strings.Join(modelNames, ",")
	if !o.Multi && len(st.Models) == 1 {
		st.Model, st.Models = &st.Models[0], nil
	}
	if st.Release == nil {
		st.Release = old.Release
	}
	if d := o.Deployment; d != nil {
		st.ReadyReplicas = d.Status.ReadyReplicas
	}
	st.Ready = fmt.Sprintf("%d/%d", st.ReadyReplicas, st.Replicas)
	set := func(t string, ok bool, reason, msg string) {
		status := metav1.ConditionFalse
		if ok {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: t, Status: status, Reason: reason, Message: msg, ObservedGeneration: o.Generation,
		})
	}

	// ModelFetched
	fetched := o.Fetch == FetchSucceeded
	switch o.Fetch {
	case FetchSucceeded:
		set(servingv1alpha1.ConditionModelFetched, true, ReasonFetched, fetchedMessage(o))
	case FetchFailed:
		set(servingv1alpha1.ConditionModelFetched, false, o.FetchReason, o.FetchMessage)
	default:
		set(servingv1alpha1.ConditionModelFetched, false, ReasonFetching, "the model-fetch Job is running")
	}

	// Deployed
	switch {
	case o.BlockedReason != "":
		set(servingv1alpha1.ConditionDeployed, false, o.BlockedReason, o.BlockedMessage)
	case o.Conflict:
		set(servingv1alpha1.ConditionDeployed, false, ReasonConflict, errorLine(o.ReleaseErr))
	case o.ReleaseErr != nil:
		set(servingv1alpha1.ConditionDeployed, false, ReasonReleaseFailed, errorLine(o.ReleaseErr))
	case o.ReleaseCurrent && st.Release != nil:
		set(servingv1alpha1.ConditionDeployed, true, ReasonReleaseDeployed,
			fmt.Sprintf("release %s revision %d is deployed", st.Release.Name, st.Release.Revision))
	default:
		set(servingv1alpha1.ConditionDeployed, false, ReasonReleasePending, "the release is being installed")
	}
	deployed := meta.IsStatusConditionTrue(st.Conditions, servingv1alpha1.ConditionDeployed)

	// Available: the rollout of the current pod template is complete and
	// the desired number of pods pass the readiness probe.
	available, availReason, availMsg := availability(o)
	set(servingv1alpha1.ConditionAvailable, available, availReason, availMsg)

	ready := fetched && deployed && available
	phase, msg := servingv1alpha1.PhaseReady, ""
	switch {
	case ready:
	case o.BlockedReason != "":
		phase, msg = servingv1alpha1.PhaseFailed, o.BlockedMessage
	case o.Conflict || o.ReleaseErr != nil:
		phase, msg = servingv1alpha1.PhaseFailed, "Helm release: "+errorLine(o.ReleaseErr)
	case o.Fetch == FetchFailed && o.Serving && st.ReadyReplicas > 0:
		phase = servingv1alpha1.PhaseDegraded
		msg = fmt.Sprintf("model fetch failed (%s): %s; still serving the previously fetched model", o.FetchReason, o.FetchMessage)
	case o.Fetch == FetchFailed:
		phase, msg = servingv1alpha1.PhaseFailed, fmt.Sprintf("model fetch failed (%s): %s", o.FetchReason, o.FetchMessage)
	case !fetched:
		phase, msg = servingv1alpha1.PhaseFetching, fetchProgress(o)
	case !deployed:
		phase, msg = servingv1alpha1.PhaseDeploying, "installing the Helm release"
	case availReason == ReasonPodsNotReady && st.ReadyReplicas > 0 && wasServing(old.Phase):
		phase, msg = servingv1alpha1.PhaseDegraded, availMsg
	default:
		phase, msg = servingv1alpha1.PhaseDeploying, availMsg
	}
	st.Phase, st.Message = phase, msg
	if ready {
		set(servingv1alpha1.ConditionReady, true, ReasonReady, "the model is being served")
	} else {
		set(servingv1alpha1.ConditionReady, false, ReasonNotReady, msg)
	}
	return st
}

// wasServing says the ModelServer had been Ready, so that pods lost now
// make it Degraded rather than still Deploying.
func wasServing(p servingv1alpha1.Phase) bool {
	return p == servingv1alpha1.PhaseReady || p == servingv1alpha1.PhaseDegraded
}

func availability(o Observation) (bool, string, string) {
	d := o.Deployment
	switch {
	case !o.Serving:
		return false, ReasonWaitingForFetch, "serving pods start once the model is fetched"
	case d == nil:
		return false, ReasonRollingOut, "the Deployment does not exist yet"
	case d.Status.ObservedGeneration < d.Generation:
		return false, ReasonRollingOut, "the Deployment controller has not seen the latest pod template yet"
	}
	want := o.DesiredReplicas
	if d.Spec.Replicas != nil && *d.Spec.Replicas != want {
		return false, ReasonRollingOut, fmt.Sprintf("the Deployment is being scaled to %d replicas", want)
	}
	if d.Status.UpdatedReplicas < want || d.Status.Replicas > d.Status.UpdatedReplicas {
		return false, ReasonRollingOut, fmt.Sprintf("rolling out: %d of %d pods updated", d.Status.UpdatedReplicas, want)
	}
	if d.Status.ReadyReplicas < want {
		return false, ReasonPodsNotReady, fmt.Sprintf("%d of %d serving pods ready (readiness probe GET /v1/models/<name>)", d.Status.ReadyReplicas, want)
	}
	return true, ReasonAvailable, fmt.Sprintf("%d of %d serving pods ready", d.Status.ReadyReplicas, want)
}

func fetchedMessage(o Observation) string {
	if o.Multi {
		return fmt.Sprintf("the model-fetch Jobs of all %d models succeeded", len(o.Models))
	}
	return "the model-fetch Job succeeded"
}

// fetchProgress says how the running fetches are going, for
// status.message: one clause per model still being fetched.
func fetchProgress(o Observation) string {
	var parts []string
	for _, m := range o.Models {
		if m.State == FetchSucceeded {
			continue
		}
		msg := "fetching the model"
		if o.Multi {
			msg = "fetching model " + m.Name
		}
		if m.StorageURI != "" {
			msg += " from " + m.StorageURI
		}
		if m.Status.FetchedGeneration != "" {
			msg += " (still serving the previously fetched model)"
		}
		if m.State == FetchRunning {
			if m.Elapsed < time.Minute {
				msg += ": started less than a minute ago"
			} else {
				msg += fmt.Sprintf(": running for %s", strings.TrimSuffix(m.Elapsed.Truncate(time.Minute).String(), "0s"))
			}
		}
		switch {
		case m.Retries == 1:
			msg += ", 1 failed attempt retried"
		case m.Retries > 1:
			msg += fmt.Sprintf(", %d failed attempts retried", m.Retries)
		}
		parts = append(parts, msg)
	}
	return strings.Join(parts, "; ")
}

// fetchState reads a Job's outcome from its conditions.
func fetchState(job *batchv1.Job) FetchState {
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

// reasonPattern is a fetch failure's first word: "NotFound: s3://... ".
var reasonPattern = regexp.MustCompile(`^([A-Z][A-Za-z]{2,40}):\s*(.*)$`)

// parseFailure splits the fetch container's one-line termination message
// into a condition reason and a message.
func parseFailure(termination, jobMessage string) (string, string) {
	line := strings.TrimSpace(firstLine(termination))
	if m := reasonPattern.FindStringSubmatch(line); m != nil {
		return m[1], m[2]
	}
	if line != "" {
		return ReasonFetchFailed, line
	}
	if jobMessage != "" {
		return ReasonFetchFailed, jobMessage
	}
	return ReasonFetchFailed, "the model-fetch Job failed"
}

// fetchSummary is what a successful fetch writes to its termination
// message.
type fetchSummary struct {
	Versions []int64 `json:"versions"`
	Files    int64   `json:"files"`
	Bytes    int64   `json:"bytes"`
	Digest   string  `json:"digest"`
}

func parseSummary(termination string) (fetchSummary, bool) {
	var s fetchSummary
	if err := json.Unmarshal([]byte(strings.TrimSpace(termination)), &s); err != nil {
		return fetchSummary{}, false
	}
	return s, true
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// redactURI drops what may carry a secret from a storage URI before it goes
// into a status or an Event: user info, and the query of a signed URL.
func redactURI(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an unparsable URI)"
	}
	if u.User != nil {
		u.User = url.User("REDACTED")
	}
	if u.RawQuery != "" {
		u.RawQuery = "REDACTED"
	}
	return u.String()
}

// errorLine shortens an error to one line for a condition message.
func errorLine(err error) string {
	if err == nil {
		return ""
	}
	msg := strings.ReplaceAll(err.Error(), "\n", " ")
	if len(msg) > 1024 {
		msg = msg[:1024] + "…"
	}
	return msg
}
