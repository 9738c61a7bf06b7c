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
			hpa := &autoscalingv2.HorizontalPodAutoscaler{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "rules-"},
				Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
					ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "rules"},
					MinReplicas:    ptrTo[int32](1),
					MaxReplicas:    4,
					Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
						Name: "cpu", Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptrTo[int32](60)}}}},
					Behavior: b,
				},
			}
			apiErr := env.client.Create(context.Background(), hpa, client.DryRunAll)
			if (refused != nil) != (apiErr != nil) {
				t.Errorf("the operator: %v\nthe apiserver: %v", refused, apiErr)
			}
		})
	}
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
					HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix,
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
