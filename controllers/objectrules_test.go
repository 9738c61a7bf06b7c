package controllers_test

import (
	"context"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// TestTheOperatorRefusesTheAutoscalerBehaviorTheAPIServerRefuses holds
// the operator's copy of the apiserver's rules for an autoscaler's
// behavior to the apiserver: each case's behavior goes on an autoscaler
// the apiserver is asked to create (a dry run), and the operator's
// validation must refuse the ModelServer exactly when the apiserver
// refuses the autoscaler.
func TestTheOperatorRefusesTheAutoscalerBehaviorTheAPIServerRefuses(t *testing.T) {
	ns := newNamespace(t)
	policy := func(kind autoscalingv2.HPAScalingPolicyType, value, period int32) *autoscalingv2.HPAScalingRules {
		return &autoscalingv2.HPAScalingRules{Policies: []autoscalingv2.HPAScalingPolicy{{Type: kind, Value: value, PeriodSeconds: period}}}
	}
	window := func(seconds int32) *autoscalingv2.HPAScalingRules {
		return &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &seconds}
	}
	selects := func(s autoscalingv2.ScalingPolicySelect) *autoscalingv2.HPAScalingRules {
		return &autoscalingv2.HPAScalingRules{SelectPolicy: &s}
	}
	tolerance := func(q string) *autoscalingv2.HPAScalingRules {
		t := resource.MustParse(q)
		return &autoscalingv2.HPAScalingRules{Tolerance: &t}
	}
	up := func(r *autoscalingv2.HPAScalingRules) *autoscalingv2.HorizontalPodAutoscalerBehavior {
		return &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: r}
	}
	down := func(r *autoscalingv2.HPAScalingRules) *autoscalingv2.HorizontalPodAutoscalerBehavior {
		return &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: r}
	}
	cases := map[string]*autoscalingv2.HorizontalPodAutoscalerBehavior{
		"Pods policy":                  up(policy(autoscalingv2.PodsScalingPolicy, 4, 60)),
		"Percent policy":               down(policy(autoscalingv2.PercentScalingPolicy, 10, 60)),
		"policy of 0 pods":             up(policy(autoscalingv2.PodsScalingPolicy, 0, 60)),
		"policy of -10 percent":        down(policy(autoscalingv2.PercentScalingPolicy, -10, 60)),
		"policy over 1 second":         up(policy(autoscalingv2.PodsScalingPolicy, 1, 1)),
		"policy over 0 seconds":        up(policy(autoscalingv2.PodsScalingPolicy, 1, 0)),
		"policy over 30 minutes":       down(policy(autoscalingv2.PodsScalingPolicy, 1, 1800)),
		"policy over 30 min and 1 s":   down(policy(autoscalingv2.PodsScalingPolicy, 1, 1801)),
		"policy of 500 percent":        up(policy(autoscalingv2.PercentScalingPolicy, 500, 15)),
		"policy type lower case":       up(policy("pods", 1, 60)),
		"policy type of another name":  up(policy("Percentage", 1, 60)),
		"no policies":                  up(&autoscalingv2.HPAScalingRules{Policies: []autoscalingv2.HPAScalingPolicy{}}),
		"window of 0 s":                down(window(0)),
		"window of an hour":            down(window(3600)),
		"window of an hour and 1 s":    up(window(3601)),
		"negative window":              down(window(-1)),
		"select Max":                   up(selects(autoscalingv2.MaxChangePolicySelect)),
		"select Min":                   up(selects(autoscalingv2.MinChangePolicySelect)),
		"select Disabled":              down(selects(autoscalingv2.DisabledPolicySelect)),
		"select misspelt":              down(selects("Maximum")),
		"select in lower case":         down(selects("max")),
		"tolerance of 5 percent":       up(tolerance("0.05")),
		"tolerance of 0":               down(tolerance("0")),
		"negative tolerance":           down(tolerance("-0.1")),
		"both sides, one out of range": {ScaleUp: window(60), ScaleDown: policy(autoscalingv2.PodsScalingPolicy, 1, 0)},
		"empty":                        {},
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			_, refused := values.Validate(newModelServer(ns, "rules", func(ms *servingv1alpha1.ModelServer) {
				ms.Spec.Replicas = nil
				ms.Spec.Autoscaling = &servingv1alpha1.Autoscaling{MaxReplicas: 4, TargetCPUUtilizationPercentage: ptrTo[int32](60), Behavior: b}
			}))
			apiErr := createAutoscalerDryRun(ns, nil, b)
			if (refused != nil) != (apiErr != nil) {
				t.Errorf("the operator: %v\nthe apiserver: %v", refused, apiErr)
			}
		})
	}
}

// TestTheOperatorRefusesTheAutoscalerMetricsTheAPIServerRefuses: the same
// for spec.autoscaling.metrics, each case a metric beside a CPU target.
func TestTheOperatorRefusesTheAutoscalerMetricsTheAPIServerRefuses(t *testing.T) {
	ns := newNamespace(t)
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	target := func(typ autoscalingv2.MetricTargetType, value, average *resource.Quantity, utilization *int32) autoscalingv2.MetricTarget {
		return autoscalingv2.MetricTarget{Type: typ, Value: value, AverageValue: average, AverageUtilization: utilization}
	}
	id := func(name string) autoscalingv2.MetricIdentifier { return autoscalingv2.MetricIdentifier{Name: name} }
	pods := func(name string, t autoscalingv2.MetricTarget) autoscalingv2.MetricSpec {
		return autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{Metric: id(name), Target: t}}
	}
	object := func(kind, name string, t autoscalingv2.MetricTarget) autoscalingv2.MetricSpec {
		return autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
			DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "networking.k8s.io/v1", Kind: kind, Name: name}, Metric: id("requests_per_second"), Target: t}}
	}
	external := func(t autoscalingv2.MetricTarget) autoscalingv2.MetricSpec {
		return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{Metric: id("queue_depth"), Target: t}}
	}
	res := func(name corev1.ResourceName, t autoscalingv2.MetricTarget) autoscalingv2.MetricSpec {
		return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: name, Target: t}}
	}
	container := func(c string, t autoscalingv2.MetricTarget) autoscalingv2.MetricSpec {
		return autoscalingv2.MetricSpec{Type: autoscalingv2.ContainerResourceMetricSourceType, ContainerResource: &autoscalingv2.ContainerResourceMetricSource{Name: "cpu", Container: c, Target: t}}
	}
	avg := target(autoscalingv2.AverageValueMetricType, nil, q("10"), nil)
	withSelector := pods("tensorflow_serving_request_rate", avg)
	withSelector.Pods.Metric.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"model": "resnet"}}
	badSelector := pods("tensorflow_serving_request_rate", avg)
	badSelector.Pods.Metric.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"model": "a b"}}
	twoSources := pods("rate", avg)
	twoSources.External = &autoscalingv2.ExternalMetricSource{Metric: id("queue_depth"), Target: avg}
	cases := map[string]autoscalingv2.MetricSpec{
		"pods, average value":              pods("tensorflow_serving_request_rate", avg),
		"pods, with a selector":            withSelector,
		"pods, with a bad selector":        badSelector,
		"pods, value only":                 pods("rate", target(autoscalingv2.ValueMetricType, q("10"), nil, nil)),
		"pods, value and average":          pods("rate", target(autoscalingv2.AverageValueMetricType, q("10"), q("10"), nil)),
		"pods, zero average":               pods("rate", target(autoscalingv2.AverageValueMetricType, nil, q("0"), nil)),
		"pods, negative average":           pods("rate", target(autoscalingv2.AverageValueMetricType, nil, q("-1"), nil)),
		"pods, milli average":              pods("rate", target(autoscalingv2.AverageValueMetricType, nil, q("500m"), nil)),
		"pods, no name":                    pods("", avg),
		"pods, a slash in the name":        pods("requests/second", avg),
		"pods, name ..":                    pods("..", avg),
		"pods, no target type":             pods("rate", target("", nil, q("10"), nil)),
		"pods, target type misspelt":       pods("rate", target("Average", nil, q("10"), nil)),
		"object, value":                    object("Ingress", "resnet", target(autoscalingv2.ValueMetricType, q("100"), nil, nil)),
		"object, value and average":        object("Ingress", "resnet", target(autoscalingv2.ValueMetricType, q("100"), q("10"), nil)),
		"object, utilization only":         object("Ingress", "resnet", target(autoscalingv2.UtilizationMetricType, nil, nil, ptrTo[int32](50))),
		"object, no kind":                  object("", "resnet", avg),
		"object, no name":                  object("Ingress", "", avg),
		"external, value":                  external(target(autoscalingv2.ValueMetricType, q("30"), nil, nil)),
		"external, value and average":      external(target(autoscalingv2.ValueMetricType, q("30"), q("3"), nil)),
		"external, neither":                external(target(autoscalingv2.ValueMetricType, nil, nil, nil)),
		"resource, memory utilization":     res("memory", target(autoscalingv2.UtilizationMetricType, nil, nil, ptrTo[int32](70))),
		"resource, average value":          res("cpu", target(autoscalingv2.AverageValueMetricType, nil, q("500m"), nil)),
		"resource, both":                   res("cpu", target(autoscalingv2.UtilizationMetricType, nil, q("500m"), ptrTo[int32](70))),
		"resource, zero utilization":       res("cpu", target(autoscalingv2.UtilizationMetricType, nil, nil, ptrTo[int32](0))),
		"resource, no name":                res("", target(autoscalingv2.UtilizationMetricType, nil, nil, ptrTo[int32](70))),
		"container resource":               container("tensorflow-serving", target(autoscalingv2.UtilizationMetricType, nil, nil, ptrTo[int32](70))),
		"container resource, bad name":     container("Serving_1", target(autoscalingv2.UtilizationMetricType, nil, nil, ptrTo[int32](70))),
		"container resource, no container": container("", target(autoscalingv2.UtilizationMetricType, nil, nil, ptrTo[int32](70))),
		"type without its source":          {Type: autoscalingv2.PodsMetricSourceType},
		"two sources":                      twoSources,
		"no type":                          {Pods: pods("rate", avg).Pods},
		"type misspelt":                    {Type: "Pod", Pods: pods("rate", avg).Pods},
	}
	for name, m := range cases {
		t.Run(name, func(t *testing.T) {
			_, refused := values.Validate(newModelServer(ns, "rules", func(ms *servingv1alpha1.ModelServer) {
				ms.Spec.Replicas = nil
				ms.Spec.Autoscaling = &servingv1alpha1.Autoscaling{MaxReplicas: 4, TargetCPUUtilizationPercentage: ptrTo[int32](60), Metrics: []autoscalingv2.MetricSpec{m}}
			}))
			apiErr := createAutoscalerDryRun(ns, &m, nil)
			if (refused != nil) != (apiErr != nil) {
				t.Errorf("the operator: %v\nthe apiserver: %v", refused, apiErr)
			}
		})
	}
}

// createAutoscalerDryRun asks the apiserver to create an autoscaler on a
// CPU target, with metric beside it and behavior, and says how it
// refused.
func createAutoscalerDryRun(ns string, metric *autoscalingv2.MetricSpec, behavior *autoscalingv2.HorizontalPodAutoscalerBehavior) error {
	metrics := []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: "cpu", Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptrTo[int32](60)}}}}
	if metric != nil {
		metrics = append(metrics, *metric)
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "rules-"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "rules"},
			MinReplicas:    ptrTo[int32](1),
			MaxReplicas:    4,
			Metrics:        metrics,
			Behavior:       behavior,
		},
	}
	return env.client.Create(context.Background(), hpa, client.DryRunAll)
}

// TestTheOperatorRefusesTheObjectSettingsTheAPIServerRefuses: the same
// for the model volume's size, on a claim, the Ingress's host, on an
// Ingress, and the Service's annotations, on a Service.
func TestTheOperatorRefusesTheObjectSettingsTheAPIServerRefuses(t *testing.T) {
	ns := newNamespace(t)
	for _, size := range []string{"1Gi", "1", "0", "-1Gi", "500m"} {
		t.Run("size "+size, func(t *testing.T) {
			q := resource.MustParse(size)
			_, refused := values.Validate(newModelServer(ns, "rules", func(ms *servingv1alpha1.ModelServer) { ms.Spec.Storage.Size = &q }))
			claim := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "rules-"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: q}},
				},
			}
			if apiErr := env.client.Create(context.Background(), claim, client.DryRunAll); (refused != nil) != (apiErr != nil) {
				t.Errorf("the operator: %v\nthe apiserver: %v", refused, apiErr)
			}
		})
	}
	for _, host := range []string{"tf.example.com", "*.example.com", "198.18.0.10", "0198.018.0.010", "1.2.3", "999.1.1.1"} {
		t.Run("Ingress host "+host, func(t *testing.T) {
			_, refused := values.Validate(newModelServer(ns, "rules", func(ms *servingv1alpha1.ModelServer) {
				ms.Spec.Ingress = &servingv1alpha1.IngressSpec{Host: host}
			}))
			prefix := networkingv1.PathTypePrefix
			ingress := &networkingv1.Ingress{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "rules-"},
				Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{
					HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: values.RESTAPIPath, PathType: &prefix,
						Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "rules", Port: networkingv1.ServiceBackendPort{Name: "http"}}}}}},
				}}}},
			}
			if apiErr := env.client.Create(context.Background(), ingress, client.DryRunAll); (refused != nil) != (apiErr != nil) {
				t.Errorf("the operator: %v\nthe apiserver: %v", refused, apiErr)
			}
		})
	}
	for name, annotations := range map[string]map[string]string{
		"a cloud's key":         {"service.beta.kubernetes.io/aws-load-balancer-internal": "true"},
		"a key with a space":    {"cloud lb": "internal"},
		"a key of two slashes":  {"a/b/c": "x"},
		"a prefix in capitals":  {"Example.com/x": "1"},
		"a name of 64 letters":  {strings.Repeat("n", 64): "1"},
		"a value of many lines": {"note": "a\nb"},
		"a value of 300 KiB":    {"big": strings.Repeat("x", 300<<10)},
	} {
		t.Run("annotations: "+name, func(t *testing.T) {
			_, refused := values.Validate(newModelServer(ns, "rules", func(ms *servingv1alpha1.ModelServer) { ms.Spec.Service.Annotations = annotations }))
			svc := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "rules-", Annotations: annotations},
				Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8501}}},
			}
			if apiErr := env.client.Create(context.Background(), svc, client.DryRunAll); (refused != nil) != (apiErr != nil) {
				t.Errorf("the operator: %v\nthe apiserver: %v", refused, apiErr)
			}
		})
	}
}
