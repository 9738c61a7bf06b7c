package owned

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// A Deployment whose pods the apiserver starts refusing wakes the
// reconciler, so that the status can say so at once; the same refusal
// for the next generated pod name does not.
func TestARolloutProblemWakesTheReconcilerOnce(t *testing.T) {
	refused := func(pod string) *appsv1.Deployment {
		d := &appsv1.Deployment{}
		d.Status.Conditions = []appsv1.DeploymentCondition{{
			Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue,
			Message: `pods "` + pod + `" is forbidden: exceeded quota: pods`,
		}}
		return d
	}
	for _, tc := range []struct {
		name     string
		old, new *appsv1.Deployment
		want     bool
	}{
		{"the refusal appears", &appsv1.Deployment{}, refused("a"), true},
		{"the same refusal, another pod", refused("a"), refused("b"), false},
		{"the refusal ends", refused("b"), &appsv1.Deployment{}, true},
	} {
		if got := deploymentChanged(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
