package status

import (
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/fetch"
	"github.com/modelserver-dev/modelserver-operator/internal/storageuri"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// FetchJob is what was read of one model-fetch Job.
type FetchJob struct {
	Job *batchv1.Job
	// Termination is the termination message of its newest pod in the
	// phase its fetch ended in: "" while it runs, and for a success the
	// status already holds.
	Termination string
	// PodRejected is why the apiserver refuses to create its pod, from the
	// Job's FailedCreate Event; "" if it does not.
	PodRejected string
	// OutOfMemory says that the container of its newest failed pod was
	// killed for going over its memory limit (OOMKilled): what it left as
	// its termination message is then the tail of its log.
	OutOfMemory bool
	// PodSucceeded says that its pod has exited 0 while the Job's
	// conditions do not say so yet. The Job controller adds them a moment
	// later, several seconds when it is busy; the model is in place from
	// the pod's exit.
	PodSucceeded bool
	// Pod names its running pod, if one runs, and Progress is what that
	// pod's log said of the fetch's progress when it was read for this
	// observation: nil if it was not, or said nothing of it.
	Pod      string
	Progress *fetch.Progress
}

// State is how the fetch went: as the Job's conditions say, or succeeded
// once its pod has, before the Job says so.
func (fj *FetchJob) State() FetchState {
	if fj == nil {
		return FetchMissing
	}
	state := FetchStateOf(fj.Job)
	if state == FetchRunning && fj.PodSucceeded {
		return FetchSucceeded
	}
	return state
}

// Failed says that the fetch has failed, or cannot begin: the apiserver
// refuses its pod.
func (fj *FetchJob) Failed() bool {
	state := fj.State()
	return state == FetchFailed || (state == FetchRunning && fj.PodRejected != "")
}

// Fetches says how each model's fetch of its current generation went,
// from the Jobs read (by name) and the status as it was. A model keeps
// what it had fetched before while a new generation is fetched.
func Fetches(old servingv1alpha1.ModelServerStatus, spec *values.Spec, jobs map[string]*FetchJob) []ModelFetch {
	previous := previousByName(old, spec)
	out := make([]ModelFetch, 0, len(spec.Models))
	for _, m := range spec.Models {
		out = append(out, modelFetch(m, jobs[m.FetchJob], previous))
	}
	return out
}

// previousByName is what the status as it was says of each of spec's
// models.
func previousByName(old servingv1alpha1.ModelServerStatus, spec *values.Spec) map[string]servingv1alpha1.ModelStatus {
	previous := map[string]servingv1alpha1.ModelStatus{}
	if old.Model != nil && spec.Source == values.SourceModel {
		// One model: its data stays its data when only its name changes.
		previous[spec.Models[0].Name] = *old.Model.DeepCopy()
	}
	for _, m := range old.Models {
		previous[m.Name] = *m.DeepCopy()
	}
	return previous
}

func modelFetch(m values.SpecModel, fj *FetchJob, previous map[string]servingv1alpha1.ModelStatus) ModelFetch {
	mf := foregroundFetch(m, fj, previous)
	if m.RefreshInterval() > 0 || !m.Round.IsZero() {
		inRound(&mf, m, previous[m.Name])
	}
	return mf
}

func foregroundFetch(m values.SpecModel, fj *FetchJob, previous map[string]servingv1alpha1.ModelStatus) ModelFetch {
	var job *batchv1.Job
	if fj != nil {
		job = fj.Job
	}
	state := fj.State()
	st := previous[m.Name]
	st.Name = m.Name
	st.Fetch, st.Message, st.Progress = string(state), "", nil
	mf := ModelFetch{Name: m.Name, Field: m.Field, FetchJob: m.FetchJob, State: state, StorageURI: storageuri.Redact(m.StorageURI), Received: -1}
	if job != nil {
		mf.Retries = job.Status.Failed
	}
	switch state {
	case FetchSucceeded:
		if was := st; st.FetchedGeneration != m.Generation {
			// Newly fetched: take the summary the fetch left behind, or
			// that of a model sharing the generation, whose summary was
			// taken before.
			st = servingv1alpha1.ModelStatus{Name: m.Name, Fetch: string(state), FetchedGeneration: m.Generation}
			if s, ok := fetch.ParseSummary(fj.Termination); ok {
				st.Digest, st.SizeBytes, st.Versions, st.ResolvedImage, st.SignedBy = s.Digest, s.Bytes, s.Versions, s.Image, s.SignedBy
				mf.Received = s.Received
			} else if other, ok := sameGeneration(previous, m.Generation); ok {
				st.Digest, st.SizeBytes, st.Versions, st.ResolvedImage, st.SignedBy = other.Digest, other.SizeBytes, other.Versions, other.ResolvedImage, other.SignedBy
			}
			if from := servedFrom(was); from != "" && from != m.Generation && st.Digest != "" && st.Digest == was.Digest {
				// The same model again: rolling the pods onto a copy of
				// what they serve would cost a load each, for nothing.
				st.ServedGeneration = from
			}
			mf.NewlyFetched = true
		}
	case FetchFailed:
		mf.Reason, mf.Message = FetchFailure(fj)
		st.Message = mf.Reason + ": " + mf.Message
	case FetchRunning:
		if fj.PodRejected != "" {
			mf.State = FetchFailed
			mf.Reason, mf.Message = FetchFailure(fj)
			st.Fetch, st.Message = string(FetchFailed), mf.Reason+": "+mf.Message
		} else {
			st.Progress = runningProgress(fj, previous[m.Name].Progress)
			mf.Left, mf.OutOfTime = outlook(st.Progress, job)
		}
	}
	mf.NewlyFailed = mf.State == FetchFailed && previous[m.Name].Fetch != string(FetchFailed)
	if st.FetchedGeneration != "" {
		st.ServedVersions = values.ServedVersions(m.VersionPolicy, st.Versions)
	}
	st.VersionLabels = m.VersionLabels
	mf.Status = st
	return mf
}

// runningProgress is how far a running fetch has come: as its pod's log
// said when read now, or as the status said while the same pod runs.
func runningProgress(fj *FetchJob, was *servingv1alpha1.FetchProgress) *servingv1alpha1.FetchProgress {
	switch {
	case fj.Pod == "":
		return nil
	case fj.Progress != nil:
		return APIProgress(fj.Pod, fj.Progress)
	case was != nil && was.Pod == fj.Pod:
		return was
	}
	return nil
}

// APIProgress is the progress line p of pod's fetch as the status holds it.
func APIProgress(pod string, p *fetch.Progress) *servingv1alpha1.FetchProgress {
	out := &servingv1alpha1.FetchProgress{
		Pod: pod, Time: metav1.NewTime(p.Time), Bytes: p.Bytes, Files: p.Files, BytesPerSecond: p.BytesPerSecond,
		IdleSeconds: int64(p.Idle / time.Second),
	}
	if p.TotalBytes >= 0 {
		out.TotalBytes = ptr.To(p.TotalBytes)
	}
	if p.TotalFiles >= 0 {
		out.TotalFiles = ptr.To(p.TotalFiles)
	}
	return out
}

// outlook is how long a fetch that came as far as p needs yet at the rate
// it logged then (timeLeft), and, if it does not finish within its Job's
// deadline at that rate, that deadline.
func outlook(p *servingv1alpha1.FetchProgress, job *batchv1.Job) (left, outOfTime time.Duration) {
	left = timeLeft(p)
	if left == 0 || job.Status.StartTime == nil || job.Spec.ActiveDeadlineSeconds == nil {
		return left, 0
	}
	timeout := time.Duration(*job.Spec.ActiveDeadlineSeconds) * time.Second
	if p.Time.Add(left).After(job.Status.StartTime.Add(timeout)) {
		return left, timeout
	}
	return left, 0
}

// timeLeft is how long a fetch that came as far as p needs yet at the
// rate it logged then; 0 (not known) for a fetch whose total is not (an
// archive), or that stands still.
func timeLeft(p *servingv1alpha1.FetchProgress) time.Duration {
	if p == nil || p.TotalBytes == nil || p.BytesPerSecond <= 0 || p.Bytes >= *p.TotalBytes {
		return 0
	}
	return time.Duration(float64(*p.TotalBytes-p.Bytes) / float64(p.BytesPerSecond) * float64(time.Second))
}

// servedFrom is the generation whose copy the pods serve for a model of
// this status, "" if none has been fetched.
func servedFrom(st servingv1alpha1.ModelStatus) string {
	if st.ServedGeneration != "" {
		return st.ServedGeneration
	}
	return st.FetchedGeneration
}

func sameGeneration(previous map[string]servingv1alpha1.ModelStatus, generation string) (servingv1alpha1.ModelStatus, bool) {
	for _, st := range previous {
		if st.FetchedGeneration == generation && st.Digest != "" {
			return st, true
		}
	}
	return servingv1alpha1.ModelStatus{}, false
}

// FetchFailure is the reason a failed fetch Job failed for, and what to
// say of it: out of time or of memory, as the Job and its pod tell,
// whatever the fetcher could still write; else what it wrote, or what the
// Job's condition says; or why the apiserver refuses its pod.
func FetchFailure(fj *FetchJob) (reason, message string) {
	job := fj.Job
	failure := JobFailure(job)
	switch {
	case failure != nil && failure.Reason == batchv1.JobReasonDeadlineExceeded:
		limit := time.Duration(ptr.Deref(job.Spec.ActiveDeadlineSeconds, 0)) * time.Second
		return servingv1alpha1.ReasonTimeout, fmt.Sprintf("the fetch did not finish within spec.fetch.timeout, %s, and was stopped; raise it, and the fetch is tried again", limit)
	case fj.OutOfMemory:
		c, _ := FetchContainer(job)
		limit, ok := c.Resources.Limits[corev1.ResourceMemory]
		if !ok {
			return servingv1alpha1.ReasonOutOfMemory, "the fetch container, which has no memory limit, was killed for lack of memory on its node; set spec.fetch.resources.requests.memory to what it needs, and the fetch is tried again"
		}
		return servingv1alpha1.ReasonOutOfMemory, fmt.Sprintf("the fetch container was killed for going over its memory limit, %s; raise spec.fetch.resources.limits.memory, and the fetch is tried again", limit.String())
	case FetchStateOf(job) == FetchRunning && fj.PodRejected != "":
		return servingv1alpha1.ReasonFetchPodRejected, "the model-fetch Job cannot create its pod: " + fj.PodRejected
	}
	jobMessage := ""
	if failure != nil {
		jobMessage = failure.Reason + ": " + failure.Message
	}
	return fetch.ParseFailure(fj.Termination, jobMessage)
}

// JobFailure is the failed Job's Failed condition, or, while its pods
// are being stopped, the FailureTarget one before it; nil if it has none.
func JobFailure(job *batchv1.Job) *batchv1.JobCondition {
	var target *batchv1.JobCondition
	for i, c := range job.Status.Conditions {
		switch {
		case c.Status != corev1.ConditionTrue:
		case c.Type == batchv1.JobFailed:
			return &job.Status.Conditions[i]
		case c.Type == batchv1.JobFailureTarget:
			target = &job.Status.Conditions[i]
		}
	}
	return target
}

// CredentialsRefused says which credentials Secret the store refused, and
// when: the Secret fj's pod mounted, if fj failed with AccessDenied.
func CredentialsRefused(fj *FetchJob) (secret string, at time.Time) {
	failure := JobFailure(fj.Job)
	if failure == nil || FetchStateOf(fj.Job) != FetchFailed {
		return "", time.Time{}
	}
	if reason, _ := FetchFailure(fj); reason != servingv1alpha1.ReasonAccessDenied {
		return "", time.Time{}
	}
	for _, v := range fj.Job.Spec.Template.Spec.Volumes {
		if v.Name == values.CredentialsVolume && v.Secret != nil {
			return v.Secret.SecretName, failure.LastTransitionTime.Time
		}
	}
	return "", time.Time{}
}

// FetchContainer is the Job's fetch container, and whether it has one.
func FetchContainer(job *batchv1.Job) (corev1.Container, bool) {
	for _, c := range job.Spec.Template.Spec.Containers {
		if c.Name == values.FetchContainerName {
			return c, true
		}
	}
	return corev1.Container{}, false
}
