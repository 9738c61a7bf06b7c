package controllers

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// A Deployment generation its controller has not seen is an autoscaler's
// scale only if its pod template is the one that controller had seen, as
// this process saw it; a new template, or a template never seen, is not.
func TestOnlyAnUnseenScaleOfTheSeenTemplateIsAScale(t *testing.T) {
	autoscaled := &servingv1alpha1.ModelServer{
		ObjectMeta: metav1.ObjectMeta{UID: "u1"},
		Spec:       servingv1alpha1.ModelServerSpec{Autoscaling: &servingv1alpha1.Autoscaling{MaxReplicas: 5}},
	}
	deployment := func(generation, observed int64, image string) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: generation}}
		d.Status.ObservedGeneration = observed
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "tensorflow-serving", Image: image}}
		return d
	}
	r := &ModelServerReconciler{}
	for _, step := range []struct {
		what string
		ms   *servingv1alpha1.ModelServer
		d    *appsv1.Deployment
		want bool
	}{
		{"a change before any template was seen", autoscaled, deployment(2, 1, "tfs:1"), false},
		{"the template seen", autoscaled, deployment(2, 2, "tfs:1"), false},
		{"scaled, not seen yet", autoscaled, deployment(3, 2, "tfs:1"), true},
		{"a new template, not seen yet", autoscaled, deployment(4, 2, "tfs:2"), false},
		{"the new template seen", autoscaled, deployment(4, 4, "tfs:2"), false},
		{"scaled again, not seen yet", autoscaled, deployment(5, 4, "tfs:2"), true},
		{"the autoscaler removed", &servingv1alpha1.ModelServer{ObjectMeta: autoscaled.ObjectMeta}, deployment(6, 5, "tfs:2"), false},
		{"autoscaled again, nothing kept from before", autoscaled, deployment(7, 5, "tfs:2"), false},
	} {
		if got := r.scaledOnly(step.ms, step.d); got != step.want {
			t.Errorf("%s: scaledOnly = %v, want %v", step.what, got, step.want)
		}
	}
}
