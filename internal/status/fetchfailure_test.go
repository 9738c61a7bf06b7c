package status

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// failedJob is a fetch Job with a memory limit (none if ""), failed for
// the reason as its condition of that type says.
func failedJob(memory string, condition batchv1.JobConditionType, reason, message string) *batchv1.Job {
	c := corev1.Container{Name: values.FetchContainerName}
	if memory != "" {
		c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memory)}
	}
	return &batchv1.Job{
		Spec: batchv1.JobSpec{
			ActiveDeadlineSeconds: ptr.To[int64](5400),
			Template:              corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{c}}},
		},
		Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: condition, Status: corev1.ConditionTrue, Reason: reason, Message: message}}},
	}
}

// TestAFetchOutOfTimeOrMemorySaysWhichSettingToRaise: the Job's deadline
// and its pod's OOMKilled say more than the fetcher could write, and name
// the spec.fetch setting that would have let it finish; other failures
// are the fetcher's own words.
func TestAFetchOutOfTimeOrMemorySaysWhichSettingToRaise(t *testing.T) {
	for _, tc := range []struct {
		name            string
		fj              FetchJob
		reason, message string
	}{
		{"deadline", FetchJob{Job: failedJob("512Mi", batchv1.JobFailed, batchv1.JobReasonDeadlineExceeded, "Job was active longer than specified deadline"), Termination: "FetchFailed: context canceled"},
			servingv1alpha1.ReasonTimeout, "the fetch did not finish within spec.fetch.timeout, 1h30m0s, and was stopped; raise it, and the fetch is tried again"},
		{"deadline, the pods still stopping", FetchJob{Job: failedJob("512Mi", batchv1.JobFailureTarget, batchv1.JobReasonDeadlineExceeded, "Job was active longer than specified deadline")},
			servingv1alpha1.ReasonTimeout, "the fetch did not finish within spec.fetch.timeout, 1h30m0s, and was stopped; raise it, and the fetch is tried again"},
		{"out of memory", FetchJob{Job: failedJob("64Mi", batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit"), OutOfMemory: true, Termination: `{"level":"INFO","msg":"downloading"}`},
			servingv1alpha1.ReasonOutOfMemory, "the fetch container was killed for going over its memory limit, 64Mi; raise spec.fetch.resources.limits.memory, and the fetch is tried again"},
		{"out of memory without a limit", FetchJob{Job: failedJob("", batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit"), OutOfMemory: true},
			servingv1alpha1.ReasonOutOfMemory, "the fetch container, which has no memory limit, was killed for lack of memory on its node; set spec.fetch.resources.requests.memory to what it needs, and the fetch is tried again"},
		{"the fetcher's reason", FetchJob{Job: failedJob("512Mi", batchv1.JobFailed, batchv1.JobReasonPodFailurePolicy, "Container fetch for pod x failed with exit code 3"), Termination: "NotFound: s3://b/p: no objects"},
			servingv1alpha1.ReasonNotFound, "s3://b/p: no objects"},
		{"the Job's words", FetchJob{Job: failedJob("512Mi", batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit")},
			servingv1alpha1.ReasonFetchFailed, "BackoffLimitExceeded: Job has reached the specified backoff limit"},
		{"its pod refused", FetchJob{Job: &batchv1.Job{}, PodRejected: `pods "x" is forbidden: exceeded quota: q, requested: limits.memory=512Mi`},
			servingv1alpha1.ReasonFetchPodRejected, `the model-fetch Job cannot create its pod: pods "x" is forbidden: exceeded quota: q, requested: limits.memory=512Mi`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reason, message := FetchFailure(&tc.fj)
			if reason != tc.reason || message != tc.message {
				t.Errorf("FetchFailure = %s: %s\nwant %s: %s", reason, message, tc.reason, tc.message)
			}
		})
	}
}
