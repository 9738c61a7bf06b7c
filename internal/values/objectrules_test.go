package values

import (
	"slices"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

func behavior(up, down *autoscalingv2.HPAScalingRules) func(*servingv1alpha1.ModelServer) {
	return func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Replicas = nil
		ms.Spec.Autoscaling = &servingv1alpha1.Autoscaling{MaxReplicas: 4, TargetCPUUtilizationPercentage: ptr.To[int32](60),
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: up, ScaleDown: down}}
	}
}

func policies(p ...autoscalingv2.HPAScalingPolicy) *autoscalingv2.HPAScalingRules {
	return &autoscalingv2.HPAScalingRules{Policies: p}
}

// TestAutoscalerBehaviorTheAPIServerRefusesNamesTheField: the
// autoscaler's behavior the apiserver would refuse is refused before
// anything is created. Whether the apiserver agrees, case by case, is
// TestTheOperatorRefusesTheAutoscalerBehaviorTheAPIServerRefuses in
// controllers.
func TestAutoscalerBehaviorTheAPIServerRefusesNamesTheField(t *testing.T) {
	pods := func(value, period int32) autoscalingv2.HPAScalingPolicy {
		return autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PodsScalingPolicy, Value: value, PeriodSeconds: period}
	}
	selectPolicy := func(s string) *autoscalingv2.HPAScalingRules {
		p := autoscalingv2.ScalingPolicySelect(s)
		return &autoscalingv2.HPAScalingRules{SelectPolicy: &p}
	}
	tolerance := resource.MustParse("-0.1")
	for _, tc := range []struct {
		name        string
		mutate      func(*servingv1alpha1.ModelServer)
		field, want string
	}{
		{"a policy of no pods", behavior(policies(pods(0, 60)), nil), "spec.autoscaling.behavior.scaleUp.policies[0].value", "0: must be greater than zero"},
		{"a policy of a period too long", behavior(nil, policies(pods(4, 60), pods(1, 3600))), "spec.autoscaling.behavior.scaleDown.policies[1].periodSeconds", "3600: must be between 1 and 1800"},
		{"a policy of no period", behavior(policies(pods(1, 0)), nil), "spec.autoscaling.behavior.scaleUp.policies[0].periodSeconds", "0: must be between 1 and 1800"},
		{"a policy of another type", behavior(policies(autoscalingv2.HPAScalingPolicy{Type: "Percentage", Value: 50, PeriodSeconds: 60}), nil),
			"spec.autoscaling.behavior.scaleUp.policies[0].type", `"Percentage": must be Pods or Percent`},
		{"a window of over an hour", behavior(&autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](3601)}, nil),
			"spec.autoscaling.behavior.scaleUp.stabilizationWindowSeconds", "3601: must be between 0 and 3600"},
		{"a negative window", behavior(nil, &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](-1)}),
			"spec.autoscaling.behavior.scaleDown.stabilizationWindowSeconds", "-1: must be between 0 and 3600"},
		{"a select policy misspelt", behavior(nil, selectPolicy("Maximum")), "spec.autoscaling.behavior.scaleDown.selectPolicy", `"Maximum": must be Max, Min or Disabled`},
		{"a negative tolerance", behavior(&autoscalingv2.HPAScalingRules{Tolerance: &tolerance}, nil), "spec.autoscaling.behavior.scaleUp.tolerance", "-100m: must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) { expectRefused(t, modelServer(tc.mutate), tc.field, tc.want) })
	}

	for name, mutate := range map[string]func(*servingv1alpha1.ModelServer){
		"policies at their bounds": behavior(policies(pods(1, 1), autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 1800}),
			&autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](3600)}),
		"scale down disabled": behavior(nil, selectPolicy("Disabled")),
		"no policies":         behavior(&autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0)}, policies()),
	} {
		if _, err := Validate(modelServer(mutate)); err != nil {
			t.Errorf("%s: Validate = %v, want it accepted", name, err)
		}
	}
}

// TestAutoscalerMetricsTheAPIServerRefusesNameTheField: the same for
// spec.autoscaling.metrics; TestTheOperatorRefusesTheAutoscalerMetricsTheAPIServerRefuses
// in controllers holds the rules to the apiserver.
func TestAutoscalerMetricsTheAPIServerRefusesNameTheField(t *testing.T) {
	metrics := func(m ...autoscalingv2.MetricSpec) func(*servingv1alpha1.ModelServer) {
		return func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Replicas = nil
			ms.Spec.Autoscaling = &servingv1alpha1.Autoscaling{MaxReplicas: 4, Metrics: m}
		}
	}
	rate := func(average string) autoscalingv2.MetricSpec {
		q := resource.MustParse(average)
		return autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "tensorflow_serving_request_rate"},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &q}}}
	}
	noTarget := rate("10")
	noTarget.Pods.Target.AverageValue = nil
	slash := rate("10")
	slash.Pods.Metric.Name = "requests/second"
	both := autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: "cpu",
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](60), AverageValue: ptr.To(resource.MustParse("1"))}}}
	for _, tc := range []struct {
		name        string
		mutate      func(*servingv1alpha1.ModelServer)
		field, want string
	}{
		{"no metric at all", metrics(), "spec.autoscaling", "needs targetCPUUtilizationPercentage, targetMemoryUtilizationPercentage or metrics"},
		{"a zero target", metrics(rate("1"), rate("0")), "spec.autoscaling.metrics[1].pods.target.averageValue", "0: must be positive"},
		{"no average value", metrics(noTarget), "spec.autoscaling.metrics[0].pods.target", "needs averageValue"},
		{"a slash in the metric's name", metrics(slash), "spec.autoscaling.metrics[0].pods.metric.name", `"requests/second": may not contain '/'`},
		{"a type without its source", metrics(autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType}), "spec.autoscaling.metrics[0].external", "must be set for type External"},
		{"a source of another type", metrics(autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, Pods: rate("1").Pods}), "spec.autoscaling.metrics[0].pods", "must not be set for type External"},
		{"a type misspelt", metrics(autoscalingv2.MetricSpec{Type: "Pod"}), "spec.autoscaling.metrics[0].type", `"Pod": must be Pods, Object, External, Resource or ContainerResource`},
		{"utilization and a value", metrics(both), "spec.autoscaling.metrics[0].resource.target", "takes one of averageUtilization and averageValue, not both"},
	} {
		t.Run(tc.name, func(t *testing.T) { expectRefused(t, modelServer(tc.mutate), tc.field, tc.want) })
	}

	v, err := For(modelServer(func(ms *servingv1alpha1.ModelServer) {
		metrics(rate("20"))(ms)
		ms.Spec.Autoscaling.TargetCPUUtilizationPercentage = ptr.To[int32](80)
	}), fetched)
	if err != nil {
		t.Fatal(err)
	}
	got := v.Autoscaling.Metrics
	if len(got) != 2 || got[0].Resource == nil || got[0].Resource.Name != corev1.ResourceCPU || got[1].Pods == nil || got[1].Pods.Target.AverageValue.String() != "20" {
		t.Errorf("the autoscaler's metrics %+v, want the CPU target, then the request rate", got)
	}
}

// TestObjectSettingsTheAPIServerRefusesNameTheField: annotations, labels
// and a volume size the apiserver would refuse on the Service, the
// Ingress, the ServiceMonitor or the claim are refused before anything is
// created.
func TestObjectSettingsTheAPIServerRefusesNameTheField(t *testing.T) {
	size := func(q string) func(*servingv1alpha1.ModelServer) {
		return func(ms *servingv1alpha1.ModelServer) { ms.Spec.Storage.Size = ptr.To(resource.MustParse(q)) }
	}
	for _, tc := range []struct {
		name        string
		mutate      func(*servingv1alpha1.ModelServer)
		field, want string
	}{
		{"a Service annotation key with a space", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Service.Annotations = map[string]string{"cloud lb": "internal"}
		}, "spec.service.annotations", `"cloud lb": Invalid value`},
		{"an Ingress annotation key of two slashes", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Ingress = &servingv1alpha1.IngressSpec{Host: "tf.example.com", Annotations: map[string]string{"a/b/c": "x"}}
		}, "spec.ingress.annotations", `"a/b/c": Invalid value`},
		{"an Ingress for an IP address", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Ingress = &servingv1alpha1.IngressSpec{Host: "198.18.0.10"}
		}, "spec.ingress.host", `"198.18.0.10": must be a DNS name, not an IP address`},
		{"a ServiceMonitor label value too long", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Monitoring.ServiceMonitor = &servingv1alpha1.ServiceMonitorSpec{Labels: map[string]string{"release": strings.Repeat("p", 64)}}
		}, "spec.monitoring.serviceMonitor.labels", "must be no more than 63 bytes"},
		{"a ServiceMonitor label the operator sets", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Monitoring.ServiceMonitor = &servingv1alpha1.ServiceMonitorSpec{Labels: map[string]string{"app.kubernetes.io/name": "tf"}}
		}, "spec.monitoring.serviceMonitor.labels", `"app.kubernetes.io/name" is set by the operator`},
		{"an empty volume", size("0"), "spec.storage.size", "0: must be greater than zero"},
		{"a negative volume", size("-1Gi"), "spec.storage.size", "-1Gi: must be greater than zero"},
	} {
		t.Run(tc.name, func(t *testing.T) { expectRefused(t, modelServer(tc.mutate), tc.field, tc.want) })
	}
	// A pvc:// model is on the user's claim: the size is not used.
	pvc := func(ms *servingv1alpha1.ModelServer) { ms.Spec.Model.StorageURI = "pvc://models/resnet" }
	if _, err := Validate(modelServer(pvc, size("0"))); err != nil {
		t.Errorf("a pvc:// model with a size of 0: Validate = %v, want it accepted", err)
	}
}

// TestUtilizationTargetsWithoutARequestAreWarnedOf: the autoscaler
// measures use as a share of the serving container's request, so a target
// without a request (or a limit) is warned of; nothing is refused, since a
// LimitRange may give the pods one.
func TestUtilizationTargetsWithoutARequestAreWarnedOf(t *testing.T) {
	autoscaled := func(cpu, memory bool, r corev1.ResourceRequirements) func(*servingv1alpha1.ModelServer) {
		return func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Replicas = nil
			ms.Spec.Resources = r
			ms.Spec.Autoscaling = &servingv1alpha1.Autoscaling{MaxReplicas: 4}
			if cpu {
				ms.Spec.Autoscaling.TargetCPUUtilizationPercentage = ptr.To[int32](70)
			}
			if memory {
				ms.Spec.Autoscaling.TargetMemoryUtilizationPercentage = ptr.To[int32](80)
			}
		}
	}
	cpuWarning := "spec.autoscaling.targetCPUUtilizationPercentage: the serving container has no cpu request (spec.resources.requests.cpu): the autoscaler measures use as a share of it, and will not scale unless a LimitRange of the namespace gives the pods one"
	memoryWarning := "spec.autoscaling.targetMemoryUtilizationPercentage: the serving container has no memory request (spec.resources.requests.memory): the autoscaler measures use as a share of it, and will not scale unless a LimitRange of the namespace gives the pods one"
	for _, tc := range []struct {
		name   string
		mutate func(*servingv1alpha1.ModelServer)
		want   []string
	}{
		{"CPU target, no resources", autoscaled(true, false, corev1.ResourceRequirements{}), []string{cpuWarning}},
		{"both targets, no resources", autoscaled(true, true, corev1.ResourceRequirements{}), []string{cpuWarning, memoryWarning}},
		{"both targets, a CPU request", autoscaled(true, true, corev1.ResourceRequirements{Requests: resources("cpu", "1")}), []string{memoryWarning}},
		{"memory target, a memory limit", autoscaled(false, true, corev1.ResourceRequirements{Limits: resources("memory", "2Gi")}), nil},
		{"CPU target, a CPU request", autoscaled(true, false, corev1.ResourceRequirements{Requests: resources("cpu", "500m", "memory", "1Gi")}), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := For(modelServer(tc.mutate), fetched)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(v.Warnings, tc.want) || v.WaitsForAPIs {
				t.Errorf("warnings %q (waits for APIs: %v), want %q and no wait", v.Warnings, v.WaitsForAPIs, tc.want)
			}
		})
	}
}
