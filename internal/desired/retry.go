package desired

import (
	"maps"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/status"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// Retry is a failed fetch Job to make again.
type Retry struct {
	// Models are the models the Job fetches.
	Models []string
	// Job is the Job as observed, whose UID the deletion is bound to.
	Job *batchv1.Job
	// Reason is the reason it failed for.
	Reason string
	// With are the settings it is made again with.
	With values.FetchSettings
	// Attempt is the how-manieth time it is made again for a reason a
	// retry may fix (status.RetryAfter), 0 for a change of spec.fetch or
	// of its credentials.
	Attempt int32
	// CredentialsChanged names the credentials Secret the store refused,
	// changed since: the cause, rather than spec.fetch.
	CredentialsChanged string
}

// retryPlan is what becomes of the failed fetch Jobs.
type retryPlan struct {
	retries []Retry
	// jobs are the Jobs observed, but those to make again: the models
	// they fetch are to be fetched afresh.
	jobs map[string]*status.FetchJob
	// told is where each model's retries stand, by name.
	told map[string]*servingv1alpha1.FetchRetry
	// next is when the next retry is due, zero if none is.
	next time.Time
}

// planRetries decides which failed fetch Jobs to make again: those that
// failed (or whose pod the apiserver refuses) and were made with other
// settings than spec.fetch's now, and those that failed for a reason a
// retry may fix, once their wait is over (status.RetryAfter).
func planRetries(spec *values.Spec, obs Observed) retryPlan {
	want := spec.FetchSettings()
	previous := status.PreviousRetries(obs.Status, spec)
	p := retryPlan{jobs: obs.FetchJobs, told: map[string]*servingv1alpha1.FetchRetry{}}
	for _, m := range spec.Models {
		if i := slices.IndexFunc(p.retries, func(r Retry) bool { return r.Job.Name == m.FetchJob }); i >= 0 {
			p.retries[i].Models = append(p.retries[i].Models, m.Name)
			p.told[m.Name] = p.told[p.retries[i].Models[0]]
			continue
		}
		fj := obs.FetchJobs[m.FetchJob]
		was := previous[m.Name]
		mended := credentialsChanged(fj, obs.CredentialsChanged)
		switch {
		case fj == nil || fj.State() == status.FetchSucceeded:
			// Fetched, or not yet made: nothing to retry.
			if fj == nil {
				p.stands(m, was)
			}
		case settingsChanged(fj, want) && !retriedAlready(obs.RetriedWith, m.FetchJob, want):
			p.retry(m, fj, Retry{With: want})
			p.stands(m, was)
		case mended != "":
			p.retry(m, fj, Retry{With: want, CredentialsChanged: mended})
			p.stands(m, was)
		default:
			p.planAttempt(m, fj, want, was, obs.Now)
		}
	}
	return p
}

// planAttempt plans the next retry of model m's fetch, whose Job is fj,
// and whose retries stood at was: due, it is made now; else when.
func (p *retryPlan) planAttempt(m values.SpecModel, fj *status.FetchJob, want values.FetchSettings, was servingv1alpha1.FetchRetry, now time.Time) {
	failedAt, transient := status.TransientFailure(fj)
	if !transient || m.RefreshInterval() > 0 {
		// Running, or waiting for a change of the spec, or for its
		// next refresh round.
		p.stands(m, was)
		return
	}
	r := servingv1alpha1.FetchRetry{Job: m.FetchJob, Attempts: was.Attempts}
	due := failedAt.Add(status.RetryAfter(was.Attempts))
	if now.Before(due) {
		r.NextAttempt = &metav1.Time{Time: due}
		if p.next.IsZero() || due.Before(p.next) {
			p.next = due
		}
		p.told[m.Name] = &r
		return
	}
	r.Attempts++
	p.told[m.Name] = &r
	p.retry(m, fj, Retry{With: want, Attempt: r.Attempts})
}

// stands keeps what model m's retries were (was, zero for none), with no
// attempt due: its Job is not waiting for one.
func (p *retryPlan) stands(m values.SpecModel, was servingv1alpha1.FetchRetry) {
	if was.Job != "" {
		was.NextAttempt = nil
		p.told[m.Name] = &was
	}
}

// retry makes model m's failed Job fj again.
func (p *retryPlan) retry(m values.SpecModel, fj *status.FetchJob, r Retry) {
	if len(p.retries) == 0 {
		p.jobs = maps.Clone(p.jobs)
	}
	delete(p.jobs, m.FetchJob)
	r.Models, r.Job = []string{m.Name}, fj.Job
	r.Reason, _ = status.FetchFailure(fj)
	p.retries = append(p.retries, r)
}

// tell puts where each model's retries stand in its fetch.
func (p *retryPlan) tell(fetches []status.ModelFetch) {
	for i := range fetches {
		status.TellRetry(&fetches[i], p.told[fetches[i].Name])
	}
}

// settingsChanged says that fj failed (or its pod is refused) and was made
// with other settings than want.
func settingsChanged(fj *status.FetchJob, want values.FetchSettings) bool {
	c, ok := status.FetchContainer(fj.Job)
	return fj.Failed() && ok && madeWith(fj.Job, c).NeedsRetry(want)
}

// credentialsChanged names the credentials Secret that the store refused
// when fj failed, if it has changed since: the keys mended, the fetch may
// pass. "" otherwise, and for no Job.
func credentialsChanged(fj *status.FetchJob, changed map[string]time.Time) string {
	if fj == nil {
		return ""
	}
	secret, refusedAt := status.CredentialsRefused(fj)
	if at, ok := changed[secret]; secret == "" || !ok || !at.After(refusedAt) {
		return ""
	}
	return secret
}

// retriedAlready says that this process has made the Job of that name
// again with want (Observed.RetriedWith).
func retriedAlready(retried map[string]values.FetchSettings, job string, want values.FetchSettings) bool {
	before, ok := retried[job]
	return ok && !before.NeedsRetry(want)
}

// madeWith are the fetch settings a Job was made with: its deadline, and
// the resources of its fetch container, fetch.
func madeWith(job *batchv1.Job, fetch corev1.Container) values.FetchSettings {
	return values.FetchSettings{ActiveDeadline: ptr.Deref(job.Spec.ActiveDeadlineSeconds, 0), Resources: fetch.Resources}
}
