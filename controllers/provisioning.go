package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/status"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// provisionGrace is how long a fetch pod may wait for its claim's volume
// while nothing says the volume cannot be made. In a burst the
// PersistentVolume controller, the provisioner and the scheduler each
// work through a queue: at N = 1000 on the test bed, fetch pods waited up
// to 137 s to be scheduled, and a Warning at 30 s for each was 889 false
// alarms (docs/performance.md). A provisioner that fails says so on the
// claim, and that is named from fetchPodStartGrace on.
const provisionGrace = 5 * time.Minute

// ProvisioningFailedCache is how the operator's cache holds Events: only
// the ProvisioningFailed Warnings of claims, and of each what names the
// failure. A claim's failure is then read without a request; a cluster
// without failing claims holds none.
func ProvisioningFailedCache() cache.ByObject {
	return cache.ByObject{
		Field:     fields.SelectorFromSet(status.ProvisioningFailedSelector()),
		Transform: provisioningFailedSummary,
	}
}

func provisioningFailedSummary(obj any) (any, error) {
	e, ok := obj.(*corev1.Event)
	if !ok {
		return obj, nil // a tombstone of a deleted Event
	}
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name: e.Name, Namespace: e.Namespace, UID: e.UID, ResourceVersion: e.ResourceVersion, CreationTimestamp: e.CreationTimestamp,
		},
		InvolvedObject: corev1.ObjectReference{Kind: e.InvolvedObject.Kind, Name: e.InvolvedObject.Name, UID: e.InvolvedObject.UID},
		Reason:         e.Reason, Message: e.Message, Type: e.Type, Count: e.Count, Series: e.Series,
		LastTimestamp: e.LastTimestamp, EventTime: e.EventTime,
	}, nil
}

// claimProvisioning says whether the fetch pods of ms, unschedulable for
// fetchPodStartGrace or more (the oldest for age), wait for a claim of the
// ModelServer's to get its volume, or for the scheduler to try them again
// once it has; and if so what, if anything, is wrong
// (status.ProvisioningProblem) and when to look again. The claims and
// their ProvisioningFailed Warnings are read from the cache; a claim's
// binding or failure, and the scheduler's next word on a pod, wake the
// ModelServer.
func (r *ModelServerReconciler) claimProvisioning(ctx context.Context, ms *servingv1alpha1.ModelServer, pods []corev1.Pod, age time.Duration, now time.Time) (waiting bool, problem string, lookAgainIn time.Duration, err error) {
	n := status.PodsWaitingForClaims(pods)
	if n == 0 {
		r.claimsBound.forget(ms.UID)
		return false, "", 0, nil
	}
	claims, err := r.ownClaims(ctx, ms)
	if err != nil || len(claims) == 0 {
		// None, or a claim of the user's: the scheduler's words stand.
		r.claimsBound.forget(ms.UID)
		return false, "", 0, err
	}
	var pending []corev1.PersistentVolumeClaim
	for _, c := range claims {
		if c.Status.Phase != corev1.ClaimBound {
			pending = append(pending, c)
		}
	}
	if len(pending) == 0 {
		// Every claim bound: the scheduler has not tried the pods again
		// yet. It gets fetchPodStartGrace from when that is first seen.
		if left := r.claimsBound.dueOnce(ms.UID, now.Add(fetchPodStartGrace)).Sub(now); left > 0 {
			return true, "", left, nil
		}
		return false, "", 0, nil
	}
	r.claimsBound.forget(ms.UID)
	for i := range pending {
		events := &corev1.EventList{}
		if err := r.List(ctx, events, r.eventsAboutOpts(ms.Namespace, pending[i].UID)...); err != nil {
			return false, "", 0, fmt.Errorf("list the ProvisioningFailed Events of claim %s: %w", pending[i].Name, err)
		}
		if problem = status.ProvisioningProblem(&pending[i], events.Items, age, provisionGrace); problem != "" {
			break
		}
	}
	if problem == "" {
		// Look again at the grace's end: a failure said, or the claim's
		// binding, wakes the ModelServer sooner (claimFailureModelServer,
		// the claims' watch).
		return true, "", provisionGrace - age, nil
	}
	who := "1 fetch pod"
	if n > 1 {
		who = fmt.Sprintf("%d fetch pods", n)
	}
	return true, who + " cannot be scheduled: " + problem, 0, nil
}

// claimFailureModelServer is the ModelServer whose claim a
// ProvisioningFailed Warning is about, when the Warning counts
// (status.SaysAClaimCannotBeProvisioned) and the claim is the operator's:
// the cache holds no other.
func (r *ModelServerReconciler) claimFailureModelServer(ctx context.Context, o client.Object) []reconcile.Request {
	if !countsAsFailure(o) {
		return nil
	}
	e := o.(*corev1.Event)
	claim := &corev1.PersistentVolumeClaim{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: e.Namespace, Name: e.InvolvedObject.Name}, claim); err != nil || claim.UID != e.InvolvedObject.UID {
		return nil
	}
	ms := claim.Labels[values.LabelModelServer]
	if ms == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: claim.Namespace, Name: ms}}}
}

// claimFailureNews lets through a claim's failure when it first counts or
// its words change; a provisioner's every retry only raises its count.
var claimFailureNews = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool { return countsAsFailure(e.Object) },
	UpdateFunc: func(e event.UpdateEvent) bool {
		switch {
		case !countsAsFailure(e.ObjectNew):
			return false
		case !countsAsFailure(e.ObjectOld):
			return true
		}
		return e.ObjectOld.(*corev1.Event).Message != e.ObjectNew.(*corev1.Event).Message
	},
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// countsAsFailure says o is an Event that ProvisioningProblem names
// (status.SaysAClaimCannotBeProvisioned).
func countsAsFailure(o client.Object) bool {
	e, ok := o.(*corev1.Event)
	return ok && status.SaysAClaimCannotBeProvisioned(e)
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
