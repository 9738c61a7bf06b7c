package owned

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
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

// An autoscaler that starts or stops saying it cannot scale, or wants
// more pods than its maximum, wakes the reconciler; the metrics and
// counts it rewrites at each sync do not.
func TestAnAutoscalersFaultWakesTheReconciler(t *testing.T) {
	hpa := func(active corev1.ConditionStatus, reason string, current int32) *autoscalingv2.HorizontalPodAutoscaler {
		h := &autoscalingv2.HorizontalPodAutoscaler{}
		h.Generation = 1
		h.Status.CurrentReplicas = current
		h.Status.Conditions = []autoscalingv2.HorizontalPodAutoscalerCondition{
			{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue, Reason: "SucceededGetScale"},
			{Type: autoscalingv2.ScalingActive, Status: active, Reason: reason},
		}
		return h
	}
	respec := hpa(corev1.ConditionTrue, "ValidMetricFound", 2)
	respec.Generation = 2
	limited := func(reason string, current int32) *autoscalingv2.HorizontalPodAutoscaler {
		h := hpa(corev1.ConditionTrue, "ValidMetricFound", current)
		h.Status.Conditions = append(h.Status.Conditions, autoscalingv2.HorizontalPodAutoscalerCondition{
			Type: autoscalingv2.ScalingLimited, Status: corev1.ConditionTrue, Reason: reason})
		return h
	}
	for _, tc := range []struct {
		name     string
		old, new *autoscalingv2.HorizontalPodAutoscaler
		want     bool
	}{
		{"a sync", hpa(corev1.ConditionTrue, "ValidMetricFound", 2), hpa(corev1.ConditionTrue, "ValidMetricFound", 3), false},
		{"metrics lost", hpa(corev1.ConditionTrue, "ValidMetricFound", 2), hpa(corev1.ConditionFalse, "FailedGetResourceMetric", 2), true},
		{"still lost", hpa(corev1.ConditionFalse, "FailedGetResourceMetric", 2), hpa(corev1.ConditionFalse, "FailedGetResourceMetric", 2), false},
		{"another fault", hpa(corev1.ConditionFalse, "FailedGetResourceMetric", 2), hpa(corev1.ConditionFalse, "InvalidSelector", 2), true},
		{"metrics back", hpa(corev1.ConditionFalse, "FailedGetResourceMetric", 2), hpa(corev1.ConditionTrue, "ValidMetricFound", 2), true},
		{"a new spec", hpa(corev1.ConditionTrue, "ValidMetricFound", 2), respec, true},
		{"at its maximum", hpa(corev1.ConditionTrue, "ValidMetricFound", 8), limited("TooManyReplicas", 8), true},
		{"still at its maximum", limited("TooManyReplicas", 8), limited("TooManyReplicas", 8), false},
		{"below its maximum again", limited("TooManyReplicas", 8), hpa(corev1.ConditionTrue, "ValidMetricFound", 7), true},
		{"held at its minimum", hpa(corev1.ConditionTrue, "ValidMetricFound", 1), limited("TooFewReplicas", 1), false},
	} {
		if got := autoscalerChanged(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
