package status

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// A fetch Job that failed for a reason a retry may fix (its pods used up
// their retries on a store unreachable or answering errors) is made again
// after 1, 2, 4, ... minutes, at most 30: a store down for an hour does
// not leave the ModelServer failed for good. One that failed for a reason
// no retry fixes (the fetcher's permanent exit code: NotFound,
// AccessDenied, ...), for its time or memory (spec.fetch), or whose
// model is refreshed on a schedule (its next round is the retry), is not.

// maxRetryAfter caps the wait before a retry.
const maxRetryAfter = 30 * time.Minute

// RetryAfter is how long after its failure a fetch made again attempts
// times before is made again.
func RetryAfter(attempts int32) time.Duration {
	return min(time.Minute<<min(max(attempts, 0), 5), maxRetryAfter)
}

// PreviousRetries maps each of spec's models to where the retries of its
// current fetch Job stood, as the status as it was says.
func PreviousRetries(old servingv1alpha1.ModelServerStatus, spec *values.Spec) map[string]servingv1alpha1.FetchRetry {
	out := map[string]servingv1alpha1.FetchRetry{}
	previous := previousByName(old, spec)
	for _, m := range spec.Models {
		if r := previous[m.Name].Retry; r != nil && r.Job == m.FetchJob {
			out[m.Name] = *r.DeepCopy()
		}
	}
	return out
}

// TransientFailure says when a failed fetch Job failed, if it failed for
// a reason a retry may fix: its pods used up their retries, none killed
// for its memory.
func TransientFailure(fj *FetchJob) (time.Time, bool) {
	if fj == nil || fj.OutOfMemory || FetchStateOf(fj.Job) != FetchFailed {
		return time.Time{}, false
	}
	c := JobFailure(fj.Job)
	if c == nil || c.Reason != batchv1.JobReasonBackoffLimitExceeded {
		return time.Time{}, false
	}
	return c.LastTransitionTime.Time, true
}

// TellRetry puts where the retries of mf's fetch stand (nil: nowhere) in
// its status, and, for a fetch that failed and will be made again, when
// in its message.
func TellRetry(mf *ModelFetch, r *servingv1alpha1.FetchRetry) {
	mf.Status.Retry = r
	if r == nil || r.NextAttempt == nil || mf.State != FetchFailed || mf.Refreshing {
		return
	}
	mf.Message += "; it is tried again at " + formatTime(*r.NextAttempt)
	mf.Status.Message = mf.Reason + ": " + mf.Message
}
