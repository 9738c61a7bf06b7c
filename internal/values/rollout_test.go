package values

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

func withRollout(surge, unavailable *intstr.IntOrString) func(*servingv1alpha1.ModelServer) {
	return func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Rollout = &servingv1alpha1.Rollout{MaxSurge: surge, MaxUnavailable: unavailable}
	}
}

func withReplicas(n int32) func(*servingv1alpha1.ModelServer) {
	return func(ms *servingv1alpha1.ModelServer) { ms.Spec.Replicas = &n }
}

// TestRolloutSetsTheRollingUpdate: one more pod and none fewer unless
// spec.rollout says otherwise, field by field; a maxUnavailable that lets
// a rollout stop every pod is warned of, by the count it resolves to.
func TestRolloutSetsTheRollingUpdate(t *testing.T) {
	one, zero := intstr.FromInt32(1), intstr.FromInt32(0)
	for _, tc := range []struct {
		name               string
		ms                 *servingv1alpha1.ModelServer
		surge, unavailable intstr.IntOrString
		rollDown           int32
		warning            string
	}{
		{"the default", modelServer(), one, zero, 0, ""},
		{"in place", modelServer(withReplicas(4), withRollout(ptr.To(zero), ptr.To(one))), zero, one, 1, ""},
		{"only the surge", modelServer(withRollout(ptr.To(intstr.FromString("50%")), nil)), intstr.FromString("50%"), zero, 0, ""},
		{"a percentage rounded down", modelServer(withReplicas(3), withRollout(nil, ptr.To(intstr.FromString("50%")))), one, intstr.FromString("50%"), 1, ""},
		{"the only pod", modelServer(withReplicas(1), withRollout(ptr.To(zero), ptr.To(one))), zero, one, 1,
			"spec.rollout.maxUnavailable: 1 of 1 serving pods lets a rollout stop them all before a new one is ready"},
		{"every pod", modelServer(withReplicas(2), withRollout(nil, ptr.To(intstr.FromString("100%")))), one, intstr.FromString("100%"), 2,
			"spec.rollout.maxUnavailable: 100% of 2 serving pods lets a rollout stop them all"},
		{"the autoscaler's minimum", modelServer(func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Replicas = nil
			ms.Spec.Autoscaling = &servingv1alpha1.Autoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 8, TargetCPUUtilizationPercentage: ptr.To[int32](70)}
		}, withRollout(nil, ptr.To(intstr.FromInt32(2)))), one, intstr.FromInt32(2), 2, "2 of 2 serving pods"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := For(tc.ms, fetched)
			if err != nil {
				t.Fatal(err)
			}
			if v.Serving.MaxSurge != tc.surge || v.Serving.MaxUnavailable != tc.unavailable {
				t.Errorf("maxSurge %s, maxUnavailable %s; want %s, %s", v.Serving.MaxSurge.String(), v.Serving.MaxUnavailable.String(), tc.surge.String(), tc.unavailable.String())
			}
			if got := RollUnavailable(tc.ms, DesiredReplicas(tc.ms)); got != tc.rollDown {
				t.Errorf("a rollout takes down %d pods, want %d", got, tc.rollDown)
			}
			warned := slices.ContainsFunc(v.Warnings, func(w string) bool { return tc.warning != "" && strings.Contains(w, tc.warning) })
			if tc.warning != "" && !warned || tc.warning == "" && slices.ContainsFunc(v.Warnings, func(w string) bool { return strings.HasPrefix(w, "spec.rollout") }) {
				t.Errorf("warnings %q, want %q", v.Warnings, tc.warning)
			}
		})
	}
}
