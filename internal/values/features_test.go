package values

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

func TestServedVersionsFollowThePolicy(t *testing.T) {
	found := []int64{3, 1, 2, 7}
	for _, tc := range []struct {
		name   string
		policy *servingv1alpha1.VersionPolicy
		want   []int64
	}{
		{"default: the newest", nil, []int64{7}},
		{"latest 2", &servingv1alpha1.VersionPolicy{Latest: &servingv1alpha1.LatestVersions{NumVersions: 2}}, []int64{3, 7}},
		{"latest more than found", &servingv1alpha1.VersionPolicy{Latest: &servingv1alpha1.LatestVersions{NumVersions: 9}}, []int64{1, 2, 3, 7}},
		{"specific, one missing", &servingv1alpha1.VersionPolicy{Specific: &servingv1alpha1.SpecificVersions{Versions: []int64{2, 5, 7}}}, []int64{2, 7}},
		{"all", &servingv1alpha1.VersionPolicy{All: &servingv1alpha1.AllVersions{}}, []int64{1, 2, 3, 7}},
	} {
		if got := ServedVersions(tc.policy, found); !slices.Equal(got, tc.want) {
			t.Errorf("%s: served %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := ServedVersions(nil, nil); len(got) != 0 {
		t.Errorf("nothing found, served %v", got)
	}
}

// TestTheFetchTakesTheServedVersions: the fetch is told the versions
// the policy serves, and a policy that serves others is another
// generation; the default's keeps the name it had before fetches were
// told, so an upgrade of the operator fetches nothing again.
func TestTheFetchTakesTheServedVersions(t *testing.T) {
	seen := map[string]string{}
	for _, tc := range []struct {
		name   string
		policy *servingv1alpha1.VersionPolicy
		flag   string
	}{
		{"default", nil, "latest:1"},
		{"latest 1", &servingv1alpha1.VersionPolicy{Latest: &servingv1alpha1.LatestVersions{NumVersions: 1}}, "latest:1"},
		{"latest 2", &servingv1alpha1.VersionPolicy{Latest: &servingv1alpha1.LatestVersions{NumVersions: 2}}, "latest:2"},
		{"specific", &servingv1alpha1.VersionPolicy{Specific: &servingv1alpha1.SpecificVersions{Versions: []int64{5, 2}}}, "2,5"},
		{"all", &servingv1alpha1.VersionPolicy{All: &servingv1alpha1.AllVersions{}}, ""},
	} {
		ms := modelServer(func(ms *servingv1alpha1.ModelServer) { ms.Spec.Model.VersionPolicy = tc.policy })
		v, err := For(ms, fetched)
		if err != nil {
			t.Fatal(err)
		}
		args := v.Fetches[0].Args
		if got := argValue(args, VersionsFlag); got != tc.flag || (tc.flag == "") == slices.Contains(args, VersionsFlag) {
			t.Errorf("%s: the fetch args %q; want %s %q", tc.name, args, VersionsFlag, tc.flag)
		}
		gen := generation(ms)
		if other, ok := seen[gen]; ok && tc.flag != "latest:1" {
			t.Errorf("%s: the generation of %s, %s", tc.name, other, gen)
		}
		seen[gen] = tc.name
		if tc.flag == "latest:1" && gen != "c8e0d936" {
			t.Errorf("%s: the generation changed (%s): the model would be fetched again for nothing", tc.name, gen)
		}
	}
}

func TestAutoscalingOwnsTheReplicaCount(t *testing.T) {
	ms := modelServer(func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Replicas = nil
		ms.Spec.Autoscaling = &servingv1alpha1.Autoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 5, TargetCPUUtilizationPercentage: ptr.To[int32](60)}
	})
	v, err := For(ms, fetched)
	if err != nil {
		t.Fatal(err)
	}
	if v.Serving.Replicas != 2 || v.Autoscaling == nil || v.Autoscaling.MinReplicas != 2 || len(v.Autoscaling.Metrics) != 1 {
		t.Errorf("replicas %v autoscaling %+v", v.Serving.Replicas, v.Autoscaling)
	}
	in := fetched
	in.LiveReplicas = ptr.To[int32](4)
	scaled, err := For(ms, in)
	if err != nil {
		t.Fatal(err)
	}
	if scaled.Serving.Replicas != 4 {
		t.Errorf("replicas = %d with the autoscaler at 4: an upgrade would undo it", scaled.Serving.Replicas)
	}
	if Digest("0.1.0", scaled) != Digest("0.1.0", v) {
		t.Error("the autoscaler's count changed the digest: each scaling would cost an upgrade")
	}
	if DesiredReplicas(ms) != 2 {
		t.Errorf("desired = %d, want minReplicas", DesiredReplicas(ms))
	}
	if v.Disruption == nil {
		t.Error("no disruption budget for up to 5 pods")
	}
	if v, _ := For(modelServer(func(ms *servingv1alpha1.ModelServer) { ms.Spec.Replicas = ptr.To[int32](1) }), fetched); v.Disruption != nil {
		t.Error("a disruption budget for a single pod would block node drains for nothing")
	}
}

// TestTheDisruptionBudgetIsTheSpecs: spec.disruption.maxUnavailable is
// the budget's, a count or a percentage; one that lets evictions take
// every pod, as few as there may be, is warned of.
func TestTheDisruptionBudgetIsTheSpecs(t *testing.T) {
	for _, tc := range []struct {
		name           string
		replicas       int32
		autoscaled     *servingv1alpha1.Autoscaling
		maxUnavailable intstr.IntOrString
		warned         bool
	}{
		{"a quarter of 8", 8, nil, intstr.FromString("25%"), false},
		{"2 of 3", 3, nil, intstr.FromInt32(2), false},
		{"3 of 3", 3, nil, intstr.FromInt32(3), true},
		{"67% of 3, rounded up", 3, nil, intstr.FromString("67%"), true},
		{"every pod", 4, nil, intstr.FromString("100%"), true},
		{"2 of at least 2", 0, &servingv1alpha1.Autoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 9, TargetCPUUtilizationPercentage: ptr.To[int32](70)}, intstr.FromInt32(2), true},
		{"half of at least 1, as the default", 0, &servingv1alpha1.Autoscaling{MaxReplicas: 9, TargetCPUUtilizationPercentage: ptr.To[int32](70)}, intstr.FromString("50%"), false},
		{"2 of at least 3", 0, &servingv1alpha1.Autoscaling{MinReplicas: ptr.To[int32](3), MaxReplicas: 9, TargetCPUUtilizationPercentage: ptr.To[int32](70)}, intstr.FromInt32(2), false},
	} {
		v, err := For(modelServer(func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Replicas, ms.Spec.Autoscaling = ptr.To(tc.replicas), tc.autoscaled
			if tc.autoscaled != nil {
				ms.Spec.Replicas = nil
			}
			ms.Spec.Disruption = &servingv1alpha1.Disruption{MaxUnavailable: &tc.maxUnavailable}
		}), fetched)
		if err != nil {
			t.Fatal(err)
		}
		if v.Disruption == nil || v.Disruption.MaxUnavailable != tc.maxUnavailable {
			t.Errorf("%s: disruption %+v; want maxUnavailable %s", tc.name, v.Disruption, tc.maxUnavailable.String())
		}
		warned := slices.ContainsFunc(v.Warnings, func(w string) bool { return strings.HasPrefix(w, "spec.disruption.maxUnavailable: ") })
		if warned != tc.warned {
			t.Errorf("%s: warnings %q; want one of spec.disruption: %v", tc.name, v.Warnings, tc.warned)
		}
	}
	v, _ := For(modelServer(func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Replicas = ptr.To[int32](1)
		ms.Spec.Disruption = &servingv1alpha1.Disruption{MaxUnavailable: ptr.To(intstr.FromInt32(1))}
	}), fetched)
	if v.Disruption != nil || len(v.Warnings) != 0 {
		t.Errorf("a single pod: disruption %+v, warnings %q; want no budget, as without spec.disruption", v.Disruption, v.Warnings)
	}
}

func TestGPUPicksTheGPUImageUnlessTheImageIsSet(t *testing.T) {
	gpu := func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Resources.Limits = corev1.ResourceList{GPUResource: resource.MustParse("2")}
	}
	v, _ := For(modelServer(gpu), fetched)
	if v.Serving.Image != servingv1alpha1.DefaultImage+"-gpu" || len(v.Serving.Tolerations) != 1 || len(v.Pod.Tolerations) != 0 {
		t.Errorf("image %q serving tolerations %v pod tolerations %v", v.Serving.Image, v.Serving.Tolerations, v.Pod.Tolerations)
	}
	v, _ = For(modelServer(gpu, func(ms *servingv1alpha1.ModelServer) { ms.Spec.Image = "example.com/tfs:gpu" }), fetched)
	if v.Serving.Image != "example.com/tfs:gpu" {
		t.Errorf("image %q, want the one set", v.Serving.Image)
	}
	v, _ = For(modelServer(gpu, func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.PodTemplate.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpEqual, Value: "present"}}
	}), fetched)
	if len(v.Serving.Tolerations) != 1 {
		t.Errorf("a toleration of the GPU taint was added twice: %v", v.Serving.Tolerations)
	}
}

func TestFeatureErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ms    *servingv1alpha1.ModelServer
		field string
	}{
		{"replicas and autoscaling", modelServer(func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Autoscaling = &servingv1alpha1.Autoscaling{MaxReplicas: 3, TargetCPUUtilizationPercentage: ptr.To[int32](50)}
		}), "spec.replicas"},
		{"autoscaling without a target", modelServer(func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Replicas = nil
			ms.Spec.Autoscaling = &servingv1alpha1.Autoscaling{MaxReplicas: 3}
		}), "spec.autoscaling"},
		{"batch sizes not ending at the max", modelServer(func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Batching = &servingv1alpha1.Batching{MaxBatchSize: 32, AllowedBatchSizes: []int32{8, 16}}
		}), "spec.batching.allowedBatchSizes"},
		{"drain longer than the grace period", modelServer(func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.PodTemplate.DrainSeconds = ptr.To[int64](30)
		}), "spec.podTemplate.drainSeconds"},
		{"model and models", modelServer(func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Models = []servingv1alpha1.ModelSpec{{Name: "a", StorageURI: "s3://a"}}
		}), "spec"},
		{"duplicate model names", modelServer(func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model = nil
			ms.Spec.Models = []servingv1alpha1.ModelSpec{{Name: "a", StorageURI: "s3://a"}, {Name: "a", StorageURI: "s3://b"}}
		}), "spec.models[1].name"},
		{"pvc:// among several models", modelServer(func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model = nil
			ms.Spec.Models = []servingv1alpha1.ModelSpec{{Name: "a", StorageURI: "pvc://claim/a"}}
		}), "spec.models[0].storageUri"},
		{"bad policy of the second model", modelServer(func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model = nil
			ms.Spec.Models = []servingv1alpha1.ModelSpec{{Name: "a", StorageURI: "s3://a"},
				{Name: "resnet", StorageURI: "s3://b", VersionPolicy: &servingv1alpha1.VersionPolicy{Specific: &servingv1alpha1.SpecificVersions{}}}}
		}), "spec.models[1].versionPolicy.specific.versions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := For(tc.ms, fetched)
			var ve *Error
			if !errors.As(err, &ve) || ve.Field != tc.field {
				t.Errorf("err = %v, want one naming %s", err, tc.field)
			}
		})
	}
}
