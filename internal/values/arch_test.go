package values

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// TestTFServingsOwnImagesKeepToAmd64Nodes: TF Serving's official images
// are built for linux/amd64 alone, so the operator keeps the serving pods,
// and new fetch pods that decide a node-local volume's node, on amd64
// nodes, unless the pod template chooses an architecture itself. Other
// images are left where the scheduler puts them.
func TestTFServingsOwnImagesKeepToAmd64Nodes(t *testing.T) {
	amd64 := map[string]string{corev1.LabelArchStable: "amd64"}
	image := func(img string) func(*servingv1alpha1.ModelServer) {
		return func(ms *servingv1alpha1.ModelServer) { ms.Spec.Image = img }
	}
	archTerm := func(key string, required bool) func(*servingv1alpha1.ModelServer) {
		return func(ms *servingv1alpha1.ModelServer) {
			term := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "disktype", Operator: corev1.NodeSelectorOpIn, Values: []string{"ssd"}},
				{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}},
			}}
			na := &corev1.NodeAffinity{}
			if required {
				na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term}}
			} else {
				na.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.PreferredSchedulingTerm{{Weight: 1, Preference: term}}
			}
			ms.Spec.PodTemplate.Affinity = &corev1.Affinity{NodeAffinity: na}
		}
	}
	selector := func(sel map[string]string) func(*servingv1alpha1.ModelServer) {
		return func(ms *servingv1alpha1.ModelServer) { ms.Spec.PodTemplate.NodeSelector = sel }
	}
	gpu := func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Resources.Limits = corev1.ResourceList{GPUResource: resource.MustParse("1")}
	}
	for _, tc := range []struct {
		name   string
		mutate func(*servingv1alpha1.ModelServer)
		want   map[string]string
	}{
		{"the default image", func(*servingv1alpha1.ModelServer) {}, amd64},
		{"the default GPU image", gpu, amd64},
		{"another tag", image("tensorflow/serving:2.18.0"), amd64},
		{"Docker Hub named", image("docker.io/tensorflow/serving:2.19.1"), amd64},
		{"by digest from Docker Hub's index", image("index.docker.io/tensorflow/serving@sha256:" + sha256Hex), amd64},
		{"with a node selector of other labels", selector(map[string]string{"disktype": "ssd"}), amd64},
		{"with an architecture preferred, not required", archTerm(corev1.LabelArchStable, false), amd64},
		{"a mirror", image("registry.example.com/tensorflow/serving:2.19.1"), nil},
		{"a registry on a port", image("localhost:5000/tensorflow/serving:2.19.1"), nil},
		{"another repository", image("tensorflow/serving-arm64:2.19.1"), nil},
		{"the user's own build", image("example.com/ml/tf-serving:2.19.1-arm64"), nil},
		{"an architecture chosen by node selector", selector(map[string]string{corev1.LabelArchStable: "arm64"}), nil},
		{"an architecture chosen by the old label", selector(map[string]string{"beta.kubernetes.io/arch": "amd64"}), nil},
		{"an architecture required by affinity", archTerm(corev1.LabelArchStable, true), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := modelServer(tc.mutate)
			v, err := For(ms, fetched)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(v.Serving.NodeSelector, tc.want) {
				t.Errorf("serving pods' added node selector %v, want %v", v.Serving.NodeSelector, tc.want)
			}
			if !maps.Equal(v.Fetches[0].NodeSelector, tc.want) {
				t.Errorf("a new fetch Job's added node selector %v, want %v", v.Fetches[0].NodeSelector, tc.want)
			}
			if !maps.Equal(v.Pod.NodeSelector, ms.Spec.PodTemplate.NodeSelector) {
				t.Errorf("the pods' shared node selector %v, want the template's %v", v.Pod.NodeSelector, ms.Spec.PodTemplate.NodeSelector)
			}
		})
	}
}

// TestAFetchJobKeepsTheNodeSelectorItWasMadeWith: a Job's pod template
// cannot change, and the rule above is not part of the fetch generation,
// so that changing the serving image fetches nothing again. A Job made
// before the rule, or before the image changed, renders as it was made;
// the serving pods follow the image at once.
func TestAFetchJobKeepsTheNodeSelectorItWasMadeWith(t *testing.T) {
	amd64 := map[string]string{corev1.LabelArchStable: "amd64"}
	union := func(a, b map[string]string) map[string]string {
		u := maps.Clone(a)
		maps.Copy(u, b)
		return u
	}
	own := map[string]string{"disktype": "ssd"}
	ms := modelServer(func(ms *servingv1alpha1.ModelServer) { ms.Spec.PodTemplate.NodeSelector = own })
	custom := modelServer(func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.PodTemplate.NodeSelector = own
		ms.Spec.Image = "example.com/ml/tf-serving:2.19.1"
	})
	expect(t, "fetch generation across the image change", generation(custom), generation(ms))

	for _, tc := range []struct {
		name        string
		ms          *servingv1alpha1.ModelServer
		madeWith    map[string]string
		wantFetch   map[string]string
		wantServing map[string]string
	}{
		{"made before the rule", ms, own, nil, amd64},
		{"made for the official image, now another", custom, union(own, amd64), amd64, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := fetched
			in.LiveJobs = map[string]LiveJob{generation(tc.ms): {Program: Program{Image: "example.com/op:1"}, NodeSelector: tc.madeWith}}
			v, err := For(tc.ms, in)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(v.Fetches[0].NodeSelector, tc.wantFetch) {
				t.Errorf("the live Job's added node selector %v, want %v", v.Fetches[0].NodeSelector, tc.wantFetch)
			}
			if !maps.Equal(v.Serving.NodeSelector, tc.wantServing) {
				t.Errorf("serving pods' added node selector %v, want the image's %v", v.Serving.NodeSelector, tc.wantServing)
			}
		})
	}
}

const sha256Hex = "4c7e1e1a3c4f5d0a9b8e7f6a5d4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c"
