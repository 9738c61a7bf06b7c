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
// have changed since, so that the release makes them again with these
// settings. A deletion is bound to the Job observed: a Job the cache still
// shows after it was made again is not deleted a second time.
func (r *ModelServerReconciler) retryFetches(ctx context.Context, ms *servingv1alpha1.ModelServer, retries []desired.Retry) error {
	for _, retry := range retries {
		job := &batchv1.Job{}
		job.Namespace, job.Name = retry.Job.Namespace, retry.Job.Name
		err := r.Delete(ctx, job, client.Preconditions{UID: &retry.Job.UID}, client.PropagationPolicy("Background"))
		switch {
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			continue
		case err != nil:
			return fmt.Errorf("delete the failed model-fetch Job %s to fetch again: %w", job.Name, err)
		}
		retried := maps.Clone(r.retriedWith(ms.UID))
		if retried == nil {
			retried = map[string]values.FetchSettings{}
		}
		retried[job.Name] = retry.With
		r.fetchRetries.Store(ms.UID, retried)
		log.FromContext(ctx).Info("failed fetch tried again with new settings", "job", job.Name, "reason", retry.Reason)
		r.Recorder.Eventf(ms, nil, corev1.EventTypeNormal, eventFetchRetried, "Fetch", "%s",
			sentence("The fetch of model %s failed (%s); spec.fetch has changed since, so it is tried again with its settings", strings.Join(retry.Models, ", "), retry.Reason))
	}
	return nil
}

// retriedWith are the settings the failed fetch Jobs of the ModelServer
// of that UID were made again with, by Job name.
func (r *ModelServerReconciler) retriedWith(uid types.UID) map[string]values.FetchSettings {
	if m, ok := r.fetchRetries.Load(uid); ok {
		return m.(map[string]values.FetchSettings)
	}
	return nil
}
