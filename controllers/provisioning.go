package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/status"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// provisionGrace is how long a fetch pod may wait for its claim's volume
// while the provisioner named on the claim reports no failure. In a burst
// a provisioner works through its queue: at N = 1000 the test bed's took
// up to 137 s for the last claims, and a Warning at 30 s for each would be
// 889 false alarms (docs/performance.md). A provisioner that fails says so
// on the claim, and that is named from fetchPodStartGrace on.
const provisionGrace = 5 * time.Minute

// claimProvisioning says whether the fetch pods of ms, unschedulable for
// fetchPodStartGrace or more (the oldest for age), wait for a claim of the
// ModelServer's that a provisioner is making, and if so what, if anything,
// is wrong with it (status.ProvisioningProblem) and when to look again.
// The claims are read from the cache; their ProvisioningFailed Warnings
// with one list per claim, once at the grace and again at provisionGrace,
// not at every reconcile. A claim's binding wakes the ModelServer.
func (r *ModelServerReconciler) claimProvisioning(ctx context.Context, ms *servingv1alpha1.ModelServer, age time.Duration, now time.Time) (waiting bool, problem string, lookAgainIn time.Duration, err error) {
	claims, err := r.claimsBeingProvisioned(ctx, ms)
	if err != nil || len(claims) == 0 {
		r.claimReads.forget(ms.UID)
		return false, "", 0, err
	}
	if last, ok := r.claimReads.fresh(ms.UID, now); ok {
		return true, last.problem, last.due.Sub(now), nil
	}
	for i := range claims {
		events := &corev1.EventList{}
		if err := r.APIReader.List(ctx, events, client.InNamespace(ms.Namespace), client.MatchingFields(status.ProvisioningFailedSelector(&claims[i]))); err != nil {
			return false, "", 0, fmt.Errorf("list the Events of claim %s: %w", claims[i].Name, err)
		}
		if problem = status.ProvisioningProblem(&claims[i], events.Items, age, provisionGrace); problem != "" {
			break
		}
	}
	lookAgainIn = provisionGrace - age
	if problem != "" || lookAgainIn <= 0 {
		lookAgainIn = status.StalledRecheckMax
	}
	r.claimReads.remember(ms.UID, podRead{due: now.Add(lookAgainIn), problem: problem})
	return true, problem, lookAgainIn, nil
}

// claimsBeingProvisioned are the claims the operator made for ms, as the
// cache holds them, that wait for a provisioner to make their volume. A
// claim of the user's is not cached, and its fetch pods are judged by the
// scheduler's word alone.
func (r *ModelServerReconciler) claimsBeingProvisioned(ctx context.Context, ms *servingv1alpha1.ModelServer) ([]corev1.PersistentVolumeClaim, error) {
	list := &corev1.PersistentVolumeClaimList{}
	if err := r.List(ctx, list, client.InNamespace(ms.Namespace), client.MatchingLabels{values.LabelModelServer: ms.Name}); err != nil {
		return nil, fmt.Errorf("list the claims of %s: %w", ms.Name, err)
	}
	var out []corev1.PersistentVolumeClaim
	for _, c := range list.Items {
		if status.Provisioner(&c) != "" {
			out = append(out, c)
		}
	}
	return out, nil
}
