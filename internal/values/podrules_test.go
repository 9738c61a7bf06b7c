package values

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

func resources(kv ...string) corev1.ResourceList {
	list := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		list[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return list
}

// TestPodSettingsThePodsCannotHaveNameTheField: what the
// apiserver refuses on a pod is refused before anything is created, with
// the ModelServer's field and what is wrong with it. Whether the
// apiserver agrees, case by case, is TestTheOperatorRefusesThePodSettingsTheAPIServerRefuses
// in controllers.
func TestPodSettingsThePodsCannotHaveNameTheField(t *testing.T) {
	for _, tc := range []struct {
		name        string
		mutate      func(*servingv1alpha1.ModelServer)
		field, want string
	}{
		{"a request over its limit", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Resources = corev1.ResourceRequirements{Limits: resources("memory", "1Gi"), Requests: resources("memory", "2Gi")}
		}, "spec.resources.requests[memory]", "2Gi: must not exceed the limit, 1Gi"},
		{"a GPU request below its limit", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Resources = corev1.ResourceRequirements{Limits: resources("nvidia.com/gpu", "2"), Requests: resources("nvidia.com/gpu", "1")}
		}, "spec.resources.requests[nvidia.com/gpu]", "1: must equal the limit, 2: nvidia.com/gpu cannot be overcommitted"},
		{"a GPU request without a limit", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Resources = corev1.ResourceRequirements{Requests: resources("nvidia.com/gpu", "1")}
		}, "spec.resources.limits[nvidia.com/gpu]", "must be set, to the request (1): nvidia.com/gpu cannot be overcommitted"},
		{"half a GPU", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Resources = corev1.ResourceRequirements{Limits: resources("nvidia.com/gpu", "500m")}
		}, "spec.resources.limits[nvidia.com/gpu]", "500m: must be a whole number"},
		{"a resource without its domain", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Resources = corev1.ResourceRequirements{Limits: resources("gpu", "1")}
		}, "spec.resources.limits[gpu]", `"gpu" is not a resource of containers: a container asks for cpu, memory`},
		{"a negative limit", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Resources = corev1.ResourceRequirements{Limits: resources("cpu", "-1")}
		}, "spec.resources.limits[cpu]", "-1: must not be negative"},
		{"huge pages alone", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Resources = corev1.ResourceRequirements{Limits: resources("hugepages-2Mi", "4Mi"), Requests: resources("hugepages-2Mi", "4Mi")}
		}, "spec.resources", "huge pages need a cpu or memory request or limit too"},
		{"a resource claim", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Resources = corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}
		}, "spec.resources.claims", "declare no resource claims"},
		{"a toleration of Exists with a value", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.PodTemplate.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists, Value: "ml"}}
		}, "spec.podTemplate.tolerations[0].value", "must be empty when operator is Exists"},
		{"a toleration of every key that is not Exists", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.PodTemplate.Tolerations = []corev1.Toleration{{}, {Value: "x"}}
		}, "spec.podTemplate.tolerations[0].operator", "must be Exists when key is empty"},
		{"a toleration's seconds without NoExecute", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.PodTemplate.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule, TolerationSeconds: ptr.To[int64](60)}}
		}, "spec.podTemplate.tolerations[0].effect", "must be NoExecute when tolerationSeconds is set"},
		{"a toleration's effect misspelt", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.PodTemplate.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Effect: "NoScheduled"}}
		}, "spec.podTemplate.tolerations[0].effect", `"NoScheduled": must be NoSchedule, PreferNoSchedule or NoExecute`},
		{"a toleration's operator misspelt", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.PodTemplate.Tolerations = []corev1.Toleration{{Key: "k", Operator: "Equals", Value: "v"}}
		}, "spec.podTemplate.tolerations[0].operator", `"Equals": must be Equal or Exists`},
		{"a toleration's key with a space", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.PodTemplate.Tolerations = []corev1.Toleration{{Key: "dedicated pool", Operator: corev1.TolerationOpExists}}
		}, "spec.podTemplate.tolerations[0].key", `"dedicated pool": name part must consist of`},
		{"a required node affinity without values", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.PodTemplate.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "example.com/pool", Operator: corev1.NodeSelectorOpIn}}}},
			}}}
		}, "spec.podTemplate.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values",
			"must name at least one value when operator is In"},
		{"a pod anti-affinity without a topology key", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.PodTemplate.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
				{Weight: 50, PodAffinityTerm: corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "tf"}}}},
			}}}
		}, "spec.podTemplate.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.topologyKey", "must be set"},
		{"two spread constraints of one key and action", func(ms *servingv1alpha1.ModelServer) {
			c := corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.DoNotSchedule}
			ms.Spec.PodTemplate.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{c, c}
		}, "spec.podTemplate.topologySpreadConstraints[0]", "another constraint has the same topologyKey and whenUnsatisfiable"},
		{"a spread constraint's minDomains without DoNotSchedule", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.PodTemplate.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{
				{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway, MinDomains: ptr.To[int32](3)},
			}
		}, "spec.podTemplate.topologySpreadConstraints[0].minDomains", "needs whenUnsatisfiable: DoNotSchedule"},
		{"an environment variable of a value and a source", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.PodTemplate.Env = []corev1.EnvVar{{Name: "POD", Value: "x", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
		}, "spec.podTemplate.env[0].valueFrom", "must not be set together with value"},
		{"an environment variable of a field a pod does not offer", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.PodTemplate.Env = []corev1.EnvVar{{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.schedulerName"}}}}
		}, "spec.podTemplate.env[0].valueFrom.fieldRef.fieldPath", `"spec.schedulerName": must be one of metadata.name`},
		{"an environment variable of a Secret's key with a slash", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.PodTemplate.Env = []corev1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "a/b"}}}}
		}, "spec.podTemplate.env[0].valueFrom.secretKeyRef.key", `"a/b"`},
	} {
		t.Run(tc.name, func(t *testing.T) { expectRefused(t, modelServer(tc.mutate), tc.field, tc.want) })
	}

	for _, ok := range []struct {
		name   string
		mutate func(*servingv1alpha1.ModelServer)
	}{
		{"requests at their limits, a GPU, huge pages with memory", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Resources = corev1.ResourceRequirements{
				Limits:   resources("cpu", "2", "memory", "4Gi", "nvidia.com/gpu", "1", "hugepages-2Mi", "4Mi"),
				Requests: resources("cpu", "2", "memory", "4Gi", "nvidia.com/gpu", "1", "hugepages-2Mi", "4Mi"),
			}
		}},
		{"requests without limits, and a limit of Kubernetes' domain", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Resources = corev1.ResourceRequirements{Requests: resources("cpu", "500m", "ephemeral-storage", "1Gi"), Limits: resources("memory", "1Gi")}
		}},
		{"environment variables named as Kubernetes 1.32 allows, and of the pod's fields", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.PodTemplate.Env = []corev1.EnvVar{
				{Name: "1ST", Value: "1"}, {Name: "my-var.x", Value: "2"},
				{Name: "APP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['app.kubernetes.io/name']"}}},
				{Name: "MEM", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory"}}},
			}
		}},
		{"tolerations of every kind", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.PodTemplate.Tolerations = []corev1.Toleration{
				{Operator: corev1.TolerationOpExists},
				{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
				{Key: "dedicated", Value: "ml"},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)},
			}
		}},
	} {
		t.Run(ok.name, func(t *testing.T) {
			if _, err := Validate(modelServer(ok.mutate)); err != nil {
				t.Errorf("Validate = %v, want none", err)
			}
		})
	}
}
