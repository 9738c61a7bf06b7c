package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/status"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// provisionGrace is how long a fetch pod may wait for its claim's volume
// while the provisioner named on the claim reports no failure, and then
// for the scheduler to try it again. In a burst both work through queues:
// at N = 1000 on the test bed, fetch pods waited up to 137 s to be
// scheduled, and 11 s after their claim was bound, and a Warning at 30 s
// for each was 889 false alarms (docs/performance.md). A provisioner that
// fails says so on the claim, and that is named from fetchPodStartGrace on.
const provisionGrace = 5 * time.Minute

// claimProvisioning says whether the fetch pods of ms, unschedulable for
// fetchPodStartGrace or more (the oldest for age), wait for a claim of the
// ModelServer's that a provisioner is making, or that it has just made and
// the scheduler has not tried the pods with yet; and if so what, if
// anything, is wrong (status.ProvisioningProblem) and when to look again.
// The claims are read from the cache; their ProvisioningFailed Warnings
// with one list per claim, once at the grace and again at provisionGrace,
// not at every reconcile. A claim's binding, and the scheduler's next word
// on a pod, wake the ModelServer.
func (r *ModelServerReconciler) claimProvisioning(ctx context.Context, ms *servingv1alpha1.ModelServer, pods []corev1.Pod, age time.Duration, now time.Time) (waiting bool, problem string, lookAgainIn time.Duration, err error) {
	if !status.WaitForClaims(pods) {
		r.forgetClaims(ms.UID)
		return false, "", 0, nil
	}
	claims, err := r.ownClaims(ctx, ms)
	if err != nil {
		return false, "", 0, err
	}
	var provisioning []corev1.PersistentVolumeClaim
	bound := 0
	for _, c := range claims {
		switch {
		case status.Provisioner(&c) != "":
			provisioning = append(provisioning, c)
		case c.Status.Phase == corev1.ClaimBound:
			bound++
		}
	}
	switch {
	case len(claims) == 0 || len(provisioning)+bound < len(claims):
		// A claim of the user's, or one that no provisioner makes (its
		// class does not exist): the scheduler's words stand.
		r.forgetClaims(ms.UID)
		return false, "", 0, nil
	case len(provisioning) == 0:
		// Every claim bound: the scheduler has not tried the pods again
		// yet. It gets fetchPodStartGrace from when that is first seen.
		r.claimReads.forget(ms.UID)
		if _, seen := r.claimsBound.m.Load(ms.UID); !seen {
			r.claimsBound.remember(ms.UID, podRead{due: now.Add(fetchPodStartGrace)})
		}
		if last, ok := r.claimsBound.fresh(ms.UID, now); ok {
			return true, "", last.due.Sub(now), nil
		}
		return false, "", 0, nil
	}
	r.claimsBound.forget(ms.UID)
	if last, ok := r.claimReads.fresh(ms.UID, now); ok {
		return true, last.problem, last.due.Sub(now), nil
	}
	for i := range provisioning {
		events := &corev1.EventList{}
		if err := r.APIReader.List(ctx, events, client.InNamespace(ms.Namespace), client.MatchingFields(status.ProvisioningFailedSelector(&provisioning[i]))); err != nil {
			return false, "", 0, fmt.Errorf("list the Events of claim %s: %w", provisioning[i].Name, err)
		}
		if problem = status.ProvisioningProblem(&provisioning[i], events.Items, age, provisionGrace); problem != "" {
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

func (r *ModelServerReconciler) forgetClaims(uid types.UID) {
	r.claimReads.forget(uid)
	r.claimsBound.forget(uid)
}

// ownClaims are the claims the operator made for ms, as the cache holds
// them. A claim of the user's is not cached.
func (r *ModelServerReconciler) ownClaims(ctx context.Context, ms *servingv1alpha1.ModelServer) ([]corev1.PersistentVolumeClaim, error) {
	list := &corev1.PersistentVolumeClaimList{}
	if err := r.List(ctx, list, client.InNamespace(ms.Namespace), client.MatchingLabels{values.LabelModelServer: ms.Name}); err != nil {
		return nil, fmt.Errorf("list the claims of %s: %w", ms.Name, err)
	}
	return list.Items, nil
}
