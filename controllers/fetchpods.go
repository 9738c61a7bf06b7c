package controllers

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/modelserver-dev/modelserver-operator/internal/status"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// FetchPodsCache is how the operator's cache holds pods: only the
// model-fetch pods of ModelServers, and of each only what is read when its
// fetch ends (the phase and the containers' termination messages) and,
// while it is Pending, what says it cannot start (status.FetchPodsProblem).
// A fetch that ends, or a pod that cannot start, is then read without a
// request, and the cache holds a few hundred bytes per fetch, not the
// serving pods or any spec.
func FetchPodsCache() cache.ByObject {
	owned, err := labels.NewRequirement(values.LabelModelServer, selection.Exists, nil)
	if err != nil {
		panic(err) // constant arguments; cannot fail
	}
	fetch, err := labels.NewRequirement(values.LabelComponent, selection.Equals, []string{values.ComponentFetch})
	if err != nil {
		panic(err)
	}
	return cache.ByObject{Label: labels.NewSelector().Add(*owned, *fetch), Transform: fetchPodSummary}
}

func fetchPodSummary(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // a tombstone of a deleted pod
	}
	summary := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
			Labels: pod.Labels, CreationTimestamp: pod.CreationTimestamp, DeletionTimestamp: pod.DeletionTimestamp,
		},
		Status: corev1.PodStatus{Phase: pod.Status.Phase},
	}
	pending := pod.Status.Phase == corev1.PodPending
	if pending {
		summary.Spec.NodeName = pod.Spec.NodeName
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled {
				// Its time tells the kubelet's warnings from the
				// scheduler's before them (status.FetchPodsProblem).
				summary.Status.Conditions = []corev1.PodCondition{{
					Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message, LastTransitionTime: c.LastTransitionTime,
				}}
			}
		}
		summary.Status.InitContainerStatuses = waitingStates(pod.Status.InitContainerStatuses)
	}
	for _, cs := range pod.Status.ContainerStatuses {
		switch t, w := cs.State.Terminated, cs.State.Waiting; {
		case t != nil:
			summary.Status.ContainerStatuses = append(summary.Status.ContainerStatuses, corev1.ContainerStatus{
				Name:  cs.Name,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Reason: t.Reason, Message: t.Message}},
			})
		case pending && w != nil:
			summary.Status.ContainerStatuses = append(summary.Status.ContainerStatuses, waitingStates([]corev1.ContainerStatus{cs})...)
		}
	}
	return summary, nil
}

// waitingStates are the containers that wait, with why.
func waitingStates(statuses []corev1.ContainerStatus) []corev1.ContainerStatus {
	var out []corev1.ContainerStatus
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil {
			out = append(out, corev1.ContainerStatus{
				Name: cs.Name, Image: cs.Image,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}},
			})
		}
	}
	return out
}

// fetchPodNews lets through what a fetch pod's ModelServer must hear of
// at once: the pod's success, from which the ModelServer can say its model
// is fetched, before the Job controller marks the Job complete; a change
// of what keeps a Pending pod from starting (status.FetchPodsProblem),
// including its end; and the start of a pod late enough that its Warning
// Events may have been said (startedLate). A pod with nothing wrong wakes
// nothing until it succeeds, and the kubelet's retries of a failed pull,
// which read the same, wake nothing either.
var fetchPodNews = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool { return succeeded(e.Object) },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return !succeeded(e.ObjectOld) && succeeded(e.ObjectNew) || cannotStart(e.ObjectOld) != cannotStart(e.ObjectNew) ||
			startedLate(e.ObjectOld, e.ObjectNew, time.Now())
	},
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// cannotStart is what keeps a Pending pod from starting, as its status
// says; "" if nothing, or if it is not Pending.
func cannotStart(o client.Object) string {
	pod, ok := o.(*corev1.Pod)
	if !ok || pod.Status.Phase != corev1.PodPending {
		return ""
	}
	_, problem := status.FetchPodsProblem([]corev1.Pod{*pod}, nil)
	return problem
}

// startedLate says a pod that had started nothing on its node
// (status.NothingStarted) has moved on fetchPodStartGrace or more after
// it was scheduled, when what its Warning Events said may be in its
// ModelServer's status.
func startedLate(old, new client.Object, now time.Time) bool {
	o, ok := old.(*corev1.Pod)
	n, ok2 := new.(*corev1.Pod)
	return ok && ok2 && status.NothingStarted(o) && !status.NothingStarted(n) && now.Sub(scheduledAt(o)) >= fetchPodStartGrace
}

func succeeded(o client.Object) bool {
	pod, ok := o.(*corev1.Pod)
	return ok && pod.Status.Phase == corev1.PodSucceeded
}

// fetchPodModelServer is the ModelServer a fetch pod fetches for; none
// for another pod.
func fetchPodModelServer(_ context.Context, o client.Object) []reconcile.Request {
	ms := fetchesFor(o)
	if ms == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: ms}}}
}
