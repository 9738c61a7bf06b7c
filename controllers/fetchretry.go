package controllers

import (
	"context"
	"fmt"
	"maps"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/desired"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

const eventFetchRetried = "FetchRetried"

// retryFetches deletes the failed fetch Jobs that spec.fetch's settings
// have changed since, or that are due to be tried again, so that the
// release makes them again, and says whether it deleted any. A deletion is bound to the Job observed: a Job the cache still
// shows after it was made again is not deleted a second time.
func (r *ModelServerReconciler) retryFetches(ctx context.Context, ms *servingv1alpha1.ModelServer, retries []desired.Retry) (deleted bool, err error) {
	for _, retry := range retries {
		job := &batchv1.Job{}
		job.Namespace, job.Name = retry.Job.Namespace, retry.Job.Name
		err := r.Delete(ctx, job, client.Preconditions{UID: &retry.Job.UID}, client.PropagationPolicy("Background"))
		switch {
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			continue
		case err != nil:
			return deleted, fmt.Errorf("delete the failed model-fetch Job %s to fetch again: %w", job.Name, err)
		}
		deleted = true
		models := strings.Join(retry.Models, ", ")
		if retry.CredentialsChanged != "" {
			log.FromContext(ctx).Info("failed fetch tried again with changed credentials", "job", job.Name, "reason", retry.Reason, "secret", retry.CredentialsChanged)
			r.Recorder.Eventf(ms, nil, corev1.EventTypeNormal, eventFetchRetried, "Fetch", "%s",
				sentence("The fetch of model %s failed (%s); its credentials Secret %s has changed since, so it is tried again", models, retry.Reason, retry.CredentialsChanged))
			continue
		}
		if retry.Attempt > 0 {
			log.FromContext(ctx).Info("failed fetch tried again", "job", job.Name, "reason", retry.Reason, "attempt", retry.Attempt)
			r.Recorder.Eventf(ms, nil, corev1.EventTypeNormal, eventFetchRetried, "Fetch", "%s",
				sentence("The fetch of model %s failed (%s), for a reason a retry may fix; it is tried again (retry %d)", models, retry.Reason, retry.Attempt))
			continue
		}
		retried := maps.Clone(r.retriedWith(ms.UID))
		if retried == nil {
			retried = map[string]values.FetchSettings{}
		}
		retried[job.Name] = retry.With
		r.fetchRetries.Store(ms.UID, retried)
		log.FromContext(ctx).Info("failed fetch tried again with new settings", "job", job.Name, "reason", retry.Reason)
		r.Recorder.Eventf(ms, nil, corev1.EventTypeNormal, eventFetchRetried, "Fetch", "%s",
			sentence("The fetch of model %s failed (%s); spec.fetch has changed since, so it is tried again with its settings", models, retry.Reason))
	}
	return deleted, nil
}

// retriedWith are the settings the failed fetch Jobs of the ModelServer
// of that UID were made again with, by Job name.
func (r *ModelServerReconciler) retriedWith(uid types.UID) map[string]values.FetchSettings {
	if m, ok := r.fetchRetries.Load(uid); ok {
		return m.(map[string]values.FetchSettings)
	}
	return nil
}

// planWithRetries makes the failed fetch Jobs to make again go (a change
// of spec.fetch since they failed, or a retry due), and plans the release,
// which makes them anew: an upgrade by Helm's own, which reads every
// object, even with the same values.
func (r *ModelServerReconciler) planWithRetries(ctx context.Context, ms *servingv1alpha1.ModelServer, want *desired.State) (releasePlan, error) {
	retried, err := r.retryFetches(ctx, ms, want.Retries)
	if err != nil {
		return releasePlan{}, err
	}
	plan, err := r.planRelease(ctx, ms, want)
	if err != nil || !retried {
		return plan, err
	}
	if plan.kind == planNothing {
		// The same values, with the Job deleted still in the cache.
		plan.kind = planUpgrade
	}
	if plan.kind == planUpgrade && ms.Generation == ms.Status.ObservedGeneration {
		// Not a change of the spec: the FetchRetried Event tells it.
		plan.why, plan.quiet = "a failed fetch is tried again", true
	}
	plan.repair = true
	return plan, nil
}
