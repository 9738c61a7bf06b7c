package status

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

func TestModelsOverTheMemoryLimitAreWarnedOf(t *testing.T) {
	const gib = int64(1) << 30
	served := func(name string, size int64, versions, servedVersions []int64) ModelFetch {
		return ModelFetch{Name: name, Status: servingv1alpha1.ModelStatus{
			Name: name, FetchedGeneration: "g", SizeBytes: size, Versions: versions, ServedVersions: servedVersions,
		}}
	}
	limit := func(q string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(q)}
	}
	for _, tc := range []struct {
		name    string
		limits  corev1.ResourceList
		fetches []ModelFetch
		want    string
	}{
		{"no limit", nil, []ModelFetch{served("a", 2*gib, []int64{1}, []int64{1})}, ""},
		{"fits", limit("3Gi"), []ModelFetch{served("a", 2*gib, []int64{1}, []int64{1})}, ""},
		{"over", limit("1Gi"), []ModelFetch{served("a", 2*gib, []int64{1}, []int64{1})},
			"spec.resources.limits.memory: 1Gi is less than the 2.0 GiB of model a, which TF Serving holds in memory"},
		{"two models together", limit("3Gi"), []ModelFetch{served("a", 2*gib, []int64{1}, []int64{1}), served("b", 2*gib, []int64{4, 5}, []int64{4, 5})},
			"3Gi is less than the 4.0 GiB of models a, b,"},
		{"versions fetched and not served are left out", limit("3Gi"), []ModelFetch{served("a", 2*gib, []int64{1}, []int64{1}), served("b", 2*gib, []int64{4, 5}, []int64{5})}, ""},
		{"not fetched yet", limit("1Gi"), []ModelFetch{{Name: "a"}}, ""},
	} {
		got := ModelsOverMemory(tc.limits, tc.fetches)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q; want %q", tc.name, got, tc.want)
		}
	}
}
