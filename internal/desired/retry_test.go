package desired

import (
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/status"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// TestAFailedFetchIsRetriedWithNewFetchSettings: a failed Job (or one
// whose pod the apiserver refuses) made with other settings than
// spec.fetch's is to be made again: observed as missing, rendered afresh.
// A Job that succeeded or still runs is kept; so is a failed one made with
// the settings of now, which would only fail the same way.
func TestAFailedFetchIsRetriedWithNewFetchSettings(t *testing.T) {
	twoHours := &servingv1alpha1.FetchSpec{Timeout: &metav1.Duration{Duration: 2 * time.Hour}}
	more := &servingv1alpha1.FetchSpec{Resources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}}}
	for _, tc := range []struct {
		name     string
		fetch    *servingv1alpha1.FetchSpec
		outcome  batchv1.JobConditionType
		rejected string
		retried  bool
		state    status.FetchState
		deadline int64
	}{
		{"failed, more time", twoHours, batchv1.JobFailed, "", true, status.FetchMissing, 7200},
		{"failed, more memory", more, batchv1.JobFailed, "", true, status.FetchMissing, 3600},
		{"failed, the same settings", nil, batchv1.JobFailed, "", false, status.FetchFailed, 3600},
		{"succeeded", twoHours, batchv1.JobComplete, "", false, status.FetchSucceeded, 3600},
		{"running", twoHours, "", "", false, status.FetchRunning, 7200},
		{"its pod refused", more, "", "exceeded quota", true, status.FetchMissing, 3600},
		{"its pod refused, the same settings", nil, "", "exceeded quota", false, status.FetchFailed, 3600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := modelServer()
			ms.Spec.Fetch = tc.fetch
			fresh, err := For(ms, Observed{}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			name := fresh.Spec.Models[0].FetchJob
			j := job(name, "example.com/op:1", tc.outcome)
			st, err := For(ms, Observed{FetchJobs: map[string]*status.FetchJob{name: {Job: j, PodRejected: tc.rejected}}}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if retried := len(st.Retries) == 1 && st.Retries[0].Job == j && slices.Equal(st.Retries[0].Models, []string{"resnet"}); retried != tc.retried || len(st.Retries) > 1 {
				t.Errorf("retries %+v, want the Job retried: %t", st.Retries, tc.retried)
			}
			if st.Fetches[0].State != tc.state {
				t.Errorf("fetch %s, want %s", st.Fetches[0].State, tc.state)
			}
			f := st.Values.Fetches[0]
			if f.ActiveDeadline != tc.deadline {
				t.Errorf("the Job renders with deadline %d, want %d", f.ActiveDeadline, tc.deadline)
			}
			// Resources are rendered as made, unless the Job is made again.
			want := j.Spec.Template.Spec.Containers[0].Resources
			if tc.retried {
				want = fresh.Values.Fetches[0].Resources
			}
			if got := f.Resources.Limits.Memory(); got.Cmp(*want.Limits.Memory()) != 0 {
				t.Errorf("the Job renders with a memory limit of %s, want %s", got, want.Limits.Memory())
			}
		})
	}
}

// TestModelsSharingAFailedJobAreRetriedAsOne: two models with the same
// fetch inputs share a Job, deleted once.
func TestModelsSharingAFailedJobAreRetriedAsOne(t *testing.T) {
	ms := modelServer()
	ms.Spec.Model = nil
	ms.Spec.Models = []servingv1alpha1.ModelSpec{{Name: "a", StorageURI: "s3://models/resnet"}, {Name: "b", StorageURI: "s3://models/resnet"}}
	ms.Spec.Fetch = &servingv1alpha1.FetchSpec{Timeout: &metav1.Duration{Duration: 2 * time.Hour}}
	fresh, err := For(ms, Observed{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	name := fresh.Spec.Models[0].FetchJob
	if fresh.Spec.Models[1].FetchJob != name {
		t.Fatalf("the models do not share a Job: %s, %s", name, fresh.Spec.Models[1].FetchJob)
	}
	st, err := For(ms, Observed{FetchJobs: map[string]*status.FetchJob{name: {Job: job(name, "example.com/op:1", batchv1.JobFailed)}}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Retries) != 1 || !slices.Equal(st.Retries[0].Models, []string{"a", "b"}) {
		t.Errorf("retries %+v, want one, of models a and b", st.Retries)
	}
}

// TestAJobMadeAgainIsNotMadeAgainForTheSameSettings: a Job this process
// made again with spec.fetch's settings, whose pod template shows others
// (an admission webhook's change), is not made again while those settings
// stay: it would fail and be made again without end.
func TestAJobMadeAgainIsNotMadeAgainForTheSameSettings(t *testing.T) {
	ms := modelServer()
	ms.Spec.Fetch = &servingv1alpha1.FetchSpec{Timeout: &metav1.Duration{Duration: 2 * time.Hour}}
	fresh, err := For(ms, Observed{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	name := fresh.Spec.Models[0].FetchJob
	jobs := map[string]*status.FetchJob{name: {Job: job(name, "example.com/op:1", batchv1.JobFailed)}}
	first, err := For(ms, Observed{FetchJobs: jobs}, cfg)
	if err != nil || len(first.Retries) != 1 {
		t.Fatalf("retries %+v (%v), want one", first, err)
	}
	again, err := For(ms, Observed{FetchJobs: jobs, RetriedWith: map[string]values.FetchSettings{name: first.Retries[0].With}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Retries) != 0 || again.Fetches[0].State != status.FetchFailed {
		t.Errorf("retries %+v, fetch %s; want none, and the failure said", again.Retries, again.Fetches[0].State)
	}
	ms.Spec.Fetch.Timeout.Duration = 3 * time.Hour
	other, err := For(ms, Observed{FetchJobs: jobs, RetriedWith: map[string]values.FetchSettings{name: first.Retries[0].With}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(other.Retries) != 1 {
		t.Errorf("retries %+v, want one for settings changed again", other.Retries)
	}
}

// failedAt is a fetch Job of the default settings that failed at the
// time, for the reason.
func failedAt(name string, at time.Time, reason string) *batchv1.Job {
	j := job(name, "example.com/op:1", "")
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.NewTime(at)}}
	return j
}

// TestAFetchThatFailedForAReasonARetryMayFixIsMadeAgainLater: a Job whose
// pods used up their retries is made again 1, 2, 4, ... minutes after it
// failed, at most 30; the status says when, and how many times it was;
// the count goes with the Job. A failure no retry fixes, and one of a
// model refreshed on a schedule, wait.
func TestAFetchThatFailedForAReasonARetryMayFixIsMadeAgainLater(t *testing.T) {
	ms := modelServer()
	fresh, err := For(ms, Observed{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	name := fresh.Spec.Models[0].FetchJob
	t0 := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	observe := func(j *batchv1.Job, retry *servingv1alpha1.FetchRetry, now time.Time) *State {
		t.Helper()
		obs := Observed{Now: now, FetchJobs: map[string]*status.FetchJob{name: {Job: j}}}
		obs.Status.Model = &servingv1alpha1.ModelStatus{Name: "resnet", Fetch: "Failed", Retry: retry}
		st, err := For(ms, obs, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	failed := failedAt(name, t0, batchv1.JobReasonBackoffLimitExceeded)

	// Before its wait is over: when, in the status and for the requeue.
	st := observe(failed, nil, t0.Add(30*time.Second))
	r := st.Fetches[0].Status.Retry
	if len(st.Retries) != 0 || r == nil || r.Attempts != 0 || r.NextAttempt == nil || !r.NextAttempt.Time.Equal(t0.Add(time.Minute)) || !st.NextRetry.Equal(t0.Add(time.Minute)) {
		t.Fatalf("retries %+v, status %+v, next %v; want none yet, the next at %v", st.Retries, r, st.NextRetry, t0.Add(time.Minute))
	}
	if want := "; it is tried again at 2026-12-06T07:01:00Z"; !strings.HasSuffix(st.Fetches[0].Message, want) || !strings.HasSuffix(st.Fetches[0].Status.Message, want) {
		t.Errorf("messages %q, %q; want them to end %q", st.Fetches[0].Message, st.Fetches[0].Status.Message, want)
	}

	// Due: made again, the first retry.
	st = observe(failed, r, t0.Add(time.Minute))
	if len(st.Retries) != 1 || st.Retries[0].Attempt != 1 || st.Fetches[0].State != status.FetchMissing {
		t.Fatalf("retries %+v, fetch %s; want the Job made again, retry 1", st.Retries, st.Fetches[0].State)
	}
	r = st.Fetches[0].Status.Retry
	if r == nil || r.Attempts != 1 || r.NextAttempt != nil {
		t.Fatalf("status %+v; want 1 attempt, none due", r)
	}

	// Running again: the count stays.
	if st = observe(job(name, "example.com/op:1", ""), r, t0.Add(90*time.Second)); st.Fetches[0].Status.Retry == nil || st.Fetches[0].Status.Retry.Attempts != 1 {
		t.Errorf("while it runs again: %+v; want 1 attempt", st.Fetches[0].Status.Retry)
	}

	// Failed again: twice as long, and at most 30 minutes.
	for attempts, wait := range map[int32]time.Duration{1: 2 * time.Minute, 3: 8 * time.Minute, 5: 30 * time.Minute, 40: 30 * time.Minute} {
		t1 := t0.Add(time.Hour)
		st = observe(failedAt(name, t1, batchv1.JobReasonBackoffLimitExceeded), &servingv1alpha1.FetchRetry{Job: name, Attempts: attempts}, t1.Add(time.Second))
		if got := st.Fetches[0].Status.Retry.NextAttempt; len(st.Retries) != 0 || got == nil || !got.Time.Equal(t1.Add(wait)) {
			t.Errorf("after %d attempts, the next at %v; want %v", attempts, got, t1.Add(wait))
		}
	}

	// Waiting, when spec.fetch changes: made again at once, with them.
	waiting := &servingv1alpha1.FetchRetry{Job: name, Attempts: 2, NextAttempt: &metav1.Time{Time: t0.Add(time.Hour)}}
	ms.Spec.Fetch = &servingv1alpha1.FetchSpec{Timeout: &metav1.Duration{Duration: 2 * time.Hour}}
	st = observe(failed, waiting, t0.Add(2*time.Minute))
	if r := st.Fetches[0].Status.Retry; len(st.Retries) != 1 || st.Retries[0].Attempt != 0 || r == nil || r.Attempts != 2 || r.NextAttempt != nil {
		t.Errorf("retries %+v, status %+v; want the Job made again for the settings, no attempt due", st.Retries, r)
	}
	ms.Spec.Fetch = nil

	// Fetched: nothing more to say.
	if st = observe(job(name, "example.com/op:1", batchv1.JobComplete), r, t0.Add(2*time.Minute)); st.Fetches[0].Status.Retry != nil {
		t.Errorf("after a success: %+v; want no retry", st.Fetches[0].Status.Retry)
	}
	// Another Job (a new URI): the count was the other's.
	if st = observe(failed, &servingv1alpha1.FetchRetry{Job: "resnet-fetch-other", Attempts: 4}, t0.Add(time.Minute)); len(st.Retries) != 1 || st.Retries[0].Attempt != 1 {
		t.Errorf("retries %+v; want the first, the count being another Job's", st.Retries)
	}

	// Not retried: a permanent failure, a model refreshed on a schedule.
	if st = observe(failedAt(name, t0, batchv1.JobReasonPodFailurePolicy), nil, t0.Add(time.Hour)); len(st.Retries) != 0 || st.Fetches[0].Status.Retry != nil || !st.NextRetry.IsZero() {
		t.Errorf("a permanent failure: retries %+v, status %+v", st.Retries, st.Fetches[0].Status.Retry)
	}
	refreshed := modelServer()
	refreshed.Spec.Model.RefreshInterval = &metav1.Duration{Duration: time.Hour}
	first, err := For(refreshed, Observed{Now: t0}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	round := first.Spec.Models[0].FetchJob
	obs := Observed{Now: t0.Add(time.Minute), FetchJobs: map[string]*status.FetchJob{round: {Job: failedAt(round, t0, batchv1.JobReasonBackoffLimitExceeded)}}}
	obs.Status.Model = &servingv1alpha1.ModelStatus{Name: "resnet", Fetch: "Failed", Refresh: first.Fetches[0].Status.Refresh}
	if st, err = For(refreshed, obs, cfg); err != nil || len(st.Retries) != 0 || st.Fetches[0].State != status.FetchFailed {
		t.Errorf("a model refreshed on a schedule: retries %+v, fetch %s (%v); want its next round to be the retry", st.Retries, st.Fetches[0].State, err)
	}
}

// TestAFetchRefusedItsCredentialsIsMadeAgainOnceTheSecretChanged: a Job
// that failed with AccessDenied is made again once the credentials Secret
// it mounted has changed since (its keys mended in place), and not before;
// one that failed for another reason, or mounted no Secret, waits for the
// spec.
func TestAFetchRefusedItsCredentialsIsMadeAgainOnceTheSecretChanged(t *testing.T) {
	ms := modelServer()
	ms.Spec.Model.CredentialsSecret = "s3-creds"
	fresh, err := For(ms, Observed{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	name := fresh.Spec.Models[0].FetchJob
	t0 := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	refused := func(secret, termination string) *status.FetchJob {
		j := failedAt(name, t0, batchv1.JobReasonPodFailurePolicy)
		if secret != "" {
			j.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: values.CredentialsVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}}}
		}
		return &status.FetchJob{Job: j, Termination: termination}
	}
	const denied = "AccessDenied: s3://models/resnet/: access denied: InvalidAccessKeyId; check the keys in the credentials Secret"
	for _, tc := range []struct {
		name    string
		fj      *status.FetchJob
		changed time.Time
		retried bool
	}{
		{"changed since", refused("s3-creds", denied), t0.Add(time.Minute), true},
		{"changed before it failed", refused("s3-creds", denied), t0.Add(-time.Minute), false},
		{"changed as it failed", refused("s3-creds", denied), t0, false},
		{"not read", refused("s3-creds", denied), time.Time{}, false},
		{"another failure", refused("s3-creds", "NotFound: s3://models/resnet/: no objects under this prefix"), t0.Add(time.Minute), false},
		{"no Secret mounted", refused("", denied), t0.Add(time.Minute), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := Observed{Now: t0.Add(2 * time.Minute), FetchJobs: map[string]*status.FetchJob{name: tc.fj}}
			if !tc.changed.IsZero() {
				obs.CredentialsChanged = map[string]time.Time{"s3-creds": tc.changed}
			}
			obs.Status.Model = &servingv1alpha1.ModelStatus{Name: "resnet", Fetch: "Failed"}
			st, err := For(ms, obs, cfg)
			if err != nil {
				t.Fatal(err)
			}
			retried := len(st.Retries) == 1 && st.Retries[0].CredentialsChanged == "s3-creds" && st.Retries[0].Reason == servingv1alpha1.ReasonAccessDenied
			if retried != tc.retried || (!tc.retried && len(st.Retries) > 0) {
				t.Errorf("retries %+v; want the Job made again for its changed Secret: %t", st.Retries, tc.retried)
			}
			if tc.retried && st.Fetches[0].State != status.FetchMissing {
				t.Errorf("fetch %s; want it fetched afresh", st.Fetches[0].State)
			}
		})
	}
}
