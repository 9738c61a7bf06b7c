package desired

import (
	"slices"
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
