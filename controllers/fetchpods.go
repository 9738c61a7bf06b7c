package controllers

import (
	"context"

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

	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// FetchPodsCache is how the operator's cache holds pods: only the
// model-fetch pods of ModelServers, and of each only what is read when its
// fetch ends (the phase and the containers' termination messages). A fetch
// that ends is then read without a request, and the cache holds a few
// hundred bytes per fetch, not the serving pods or any spec.
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
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			summary.Status.ContainerStatuses = append(summary.Status.ContainerStatuses, corev1.ContainerStatus{
				Name:  cs.Name,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Reason: t.Reason, Message: t.Message}},
			})
		}
	}
	return summary, nil
}

// fetchPodSucceeded lets through a fetch pod's success: the ModelServer
// can say its model is fetched from then, before the Job controller marks
// the Job complete.
var fetchPodSucceeded = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool { return succeeded(e.Object) },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return !succeeded(e.ObjectOld) && succeeded(e.ObjectNew)
	},
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
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
