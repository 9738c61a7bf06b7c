package controllers_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// TestTheOperatorRefusesThePodSettingsTheAPIServerRefuses holds the
// operator's copy of the apiserver's rules for container resources and
// tolerations to the apiserver itself: each case's settings go on a pod
// that the apiserver is asked to create (a dry run), and the operator's
// validation must refuse the ModelServer exactly when the apiserver
// refuses the pod. Settings a feature gate decides (Lt and Gt
// tolerations) are only checked not to be refused by the operator.
func TestTheOperatorRefusesThePodSettingsTheAPIServerRefuses(t *testing.T) {
	ns := newNamespace(t)
	list := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	seconds := ptrTo[int64](30)
	type settings struct {
		resources   corev1.ResourceRequirements
		tolerations []corev1.Toleration
	}
	cases := map[string]settings{
		"request over limit":                 {resources: corev1.ResourceRequirements{Limits: list("memory", "1Gi"), Requests: list("memory", "2Gi")}},
		"request at limit":                   {resources: corev1.ResourceRequirements{Limits: list("memory", "1Gi"), Requests: list("memory", "1Gi")}},
		"request under limit":                {resources: corev1.ResourceRequirements{Limits: list("cpu", "2"), Requests: list("cpu", "250m")}},
		"requests alone":                     {resources: corev1.ResourceRequirements{Requests: list("cpu", "1", "memory", "1Gi", "ephemeral-storage", "2Gi")}},
		"GPU limit alone":                    {resources: corev1.ResourceRequirements{Limits: list("nvidia.com/gpu", "1")}},
		"GPU request alone":                  {resources: corev1.ResourceRequirements{Requests: list("nvidia.com/gpu", "1")}},
		"GPU request under limit":            {resources: corev1.ResourceRequirements{Limits: list("nvidia.com/gpu", "2"), Requests: list("nvidia.com/gpu", "1")}},
		"half a GPU":                         {resources: corev1.ResourceRequirements{Limits: list("nvidia.com/gpu", "500m")}},
		"unprefixed unknown resource":        {resources: corev1.ResourceRequirements{Limits: list("gpu", "1")}},
		"kubernetes.io resource":             {resources: corev1.ResourceRequirements{Limits: list("example.kubernetes.io/thing", "1")}},
		"requests.-prefixed domain resource": {resources: corev1.ResourceRequirements{Limits: list("requests.example.com/thing", "1")}},
		"negative cpu":                       {resources: corev1.ResourceRequirements{Limits: list("cpu", "-1")}},
		"huge pages alone":                   {resources: corev1.ResourceRequirements{Limits: list("hugepages-2Mi", "4Mi"), Requests: list("hugepages-2Mi", "4Mi")}},
		"huge pages with memory":             {resources: corev1.ResourceRequirements{Limits: list("hugepages-2Mi", "4Mi", "memory", "1Gi"), Requests: list("hugepages-2Mi", "4Mi")}},
		"huge pages request under limit":     {resources: corev1.ResourceRequirements{Limits: list("hugepages-2Mi", "4Mi", "memory", "1Gi"), Requests: list("hugepages-2Mi", "2Mi")}},
		"resource claim":                     {resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}},
		"toleration of everything":           {tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
		"toleration of every key, Equal":     {tolerations: []corev1.Toleration{{Value: "x"}}},
		"toleration Exists with a value":     {tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Value: "v"}}},
		"toleration Equal":                   {tolerations: []corev1.Toleration{{Key: "example.com/pool", Value: "ml", Effect: corev1.TaintEffectNoSchedule}}},
		"toleration value not a label value": {tolerations: []corev1.Toleration{{Key: "k", Value: "a b"}}},
		"toleration key with a space":        {tolerations: []corev1.Toleration{{Key: "a b", Operator: corev1.TolerationOpExists}}},
		"toleration seconds, NoExecute":      {tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds}}},
		"toleration seconds, NoSchedule":     {tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule, TolerationSeconds: seconds}}},
		"toleration effect misspelt":         {tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Effect: "NoScheduled"}}},
		"toleration operator misspelt":       {tolerations: []corev1.Toleration{{Key: "k", Operator: "Equals", Value: "v"}}},
	}
	gated := map[string]settings{
		"toleration Gt": {tolerations: []corev1.Toleration{{Key: "example.com/generation", Operator: corev1.TolerationOpGt, Value: "3"}}},
		"toleration Lt": {tolerations: []corev1.Toleration{{Key: "example.com/generation", Operator: corev1.TolerationOpLt, Value: "10"}}},
	}
	check := func(name string, s settings, apiserverDecides bool) {
		t.Run(name, func(t *testing.T) {
			_, refused := values.Validate(newModelServer(ns, "rules", func(ms *servingv1alpha1.ModelServer) {
				ms.Spec.Resources = s.resources
				ms.Spec.PodTemplate.Tolerations = s.tolerations
			}))
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "rules-"},
				Spec: corev1.PodSpec{
					Containers:  []corev1.Container{{Name: "c", Image: "example.com/c:1", Resources: s.resources}},
					Tolerations: s.tolerations,
				},
			}
			apiErr := env.client.Create(context.Background(), pod, client.DryRunAll)
			switch {
			case !apiserverDecides && refused != nil:
				t.Errorf("the operator refuses what a feature gate may allow: %v (the apiserver here: %v)", refused, apiErr)
			case apiserverDecides && (refused != nil) != (apiErr != nil):
				t.Errorf("the operator: %v\nthe apiserver: %v", refused, apiErr)
			}
		})
	}
	for name, s := range cases {
		check(name, s, true)
	}
	for name, s := range gated {
		check(name, s, false)
	}
}
