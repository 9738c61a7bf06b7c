package controllers

import (
	"context"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/modelserver-dev/modelserver-operator/internal/status"
)

// LookIntoRunningFetch is what a reconcile of the ModelServer of UID owner
// reads of one of its running fetch Jobs at now: why the apiserver refuses
// its pod, if it does, and when to look again.
func (r *ModelServerReconciler) LookIntoRunningFetch(ctx context.Context, owner types.UID, job *batchv1.Job, now time.Time) (refused string, lookAgainIn time.Duration, err error) {
	obs := &observed{}
	fj := &status.FetchJob{Job: job}
	err = r.observeRunningFetch(ctx, owner, fj, obs, now)
	return fj.PodRejected, obs.lookAgainIn, err
}
