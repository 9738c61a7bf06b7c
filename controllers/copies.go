package controllers

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/desired"
	"github.com/modelserver-dev/modelserver-operator/internal/status"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// eventCopyNotVerified is the reason of the Warning that says a serving
// pod was deleted for a copy of its own that is not the model verified.
const eventCopyNotVerified = "CopyNotVerified"

// verifyCopies evicts the serving pods whose own copy of a model
// (storage mode PerPod) has another digest than its fetch Job verified,
// with a Warning each, so that pods pinned to the verified model take
// their place. Such a copy can only be a new ModelServer's first pods',
// which fetch beside the first Job, before its pin: a store changed in
// place meanwhile. Pods read their pins themselves after that, so the
// pods are read once per new pins, when the rollout is done and every
// pod's fetch has ended; nothing is read for a Shared ModelServer.
//
// The only ready pod is never evicted: that would take the endpoint down,
// and the pod made in its place, fetching what the store holds now, fails
// ModelChanged if that is still not the verified model. It is named in a
// Warning instead, with what to do.
func (r *ModelServerReconciler) verifyCopies(ctx context.Context, ms *servingv1alpha1.ModelServer, want *desired.State, d *appsv1.Deployment) error {
	pins := want.Values.ConfigFiles[values.PinsFile]
	if !want.Values.Volume.PerPod || pins == "{}\n" || !rolledOut(d) {
		return nil
	}
	if was, ok := r.copiesVerified.Load(ms.UID); ok && was.(copiesChecked).pins == pins && (!was.(copiesChecked).onlyPodKept || d.Status.ReadyReplicas < 2) {
		return nil
	}
	selector, err := labels.Parse(want.Selector)
	if err != nil {
		return fmt.Errorf("the serving pods' selector: %w", err)
	}
	pods := &corev1.PodList{}
	if err := r.APIReader.List(ctx, pods, client.InNamespace(ms.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return fmt.Errorf("list the serving pods: %w", err)
	}
	checked := copiesChecked{pins: pins}
	for _, c := range status.UnverifiedCopies(pods.Items, status.Pins(want.Fetches)) {
		copyOf := fmt.Sprintf("its copy of the model (container %s), fetched before the fetch Job had verified it, has digest %s, not the Job's %s", c.Container, c.Digest, c.Pinned)
		if d.Status.ReadyReplicas < 2 {
			r.warn(ms, eventCopyNotVerified, "Verify", sentence(
				"Serving pod %s is not evicted, being the only one ready, but %s: delete it, and the pod made in its place fetches the verified model (or fails ModelChanged, if the store no longer holds it: then set a new spec.model.refetch to fetch and verify what it holds now)",
				c.Pod, copyOf))
			checked.onlyPodKept = true
			continue
		}
		// Evicted, not deleted: the disruption budget keeps the others
		// serving. One it refuses is evicted after the rollout that
		// replaces the one before.
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ms.Namespace, Name: c.Pod}}
		err := r.SubResource("eviction").Create(ctx, pod, &policyv1.Eviction{ObjectMeta: pod.ObjectMeta})
		switch {
		case apierrors.IsTooManyRequests(err):
			return nil
		case err != nil && !apierrors.IsNotFound(err):
			return fmt.Errorf("evict serving pod %s: %w", c.Pod, err)
		}
		r.Recorder.Eventf(ms, nil, corev1.EventTypeWarning, eventCopyNotVerified, "Evict", "%s", sentence(
			"Evicted serving pod %s: %s; the pod made in its place fetches the verified model, or fails ModelChanged if the store no longer holds it",
			c.Pod, copyOf))
	}
	r.copiesVerified.Store(ms.UID, checked)
	return nil
}

// copiesChecked is what verifyCopies last found under pins: onlyPodKept
// says that the only ready pod was kept with a copy not verified, and the
// pods are read again once another is ready.
type copiesChecked struct {
	pins        string
	onlyPodKept bool
}

// rolledOut says that Deployment d's rollout has ended: all its pods are
// of its newest template and ready.
func rolledOut(d *appsv1.Deployment) bool {
	if d == nil || d.Spec.Replicas == nil || d.Status.ObservedGeneration < d.Generation {
		return false
	}
	want := *d.Spec.Replicas
	return d.Status.UpdatedReplicas == want && d.Status.ReadyReplicas >= want && d.Status.Replicas == want
}
