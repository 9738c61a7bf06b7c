package values

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

func withFetch(timeout string, resources *corev1.ResourceRequirements) func(*servingv1alpha1.ModelServer) {
	return func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Fetch = &servingv1alpha1.FetchSpec{Resources: resources}
		if timeout != "" {
			d, err := time.ParseDuration(timeout)
			if err != nil {
				panic(err)
			}
			ms.Spec.Fetch.Timeout = &metav1.Duration{Duration: d}
		}
	}
}

func limits(cpu, memory string) *corev1.ResourceRequirements {
	return &corev1.ResourceRequirements{Limits: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory),
	}}
}

// expectJobSettings renders ms with in and checks its fetch Job's
// deadline and resources.
func expectJobSettings(t *testing.T, ms *servingv1alpha1.ModelServer, in Inputs, deadline int64, resources corev1.ResourceRequirements) {
	t.Helper()
	v, err := For(ms, in)
	if err != nil {
		t.Fatal(err)
	}
	if f := v.Fetches[0]; f.ActiveDeadline != deadline || !sameResources(f.Resources, resources) {
		t.Errorf("the Job renders with deadline %d and resources %v; want %d and %v", f.ActiveDeadline, f.Resources, deadline, resources)
	}
}

// TestSpecFetchSetsTheJobsDeadlineAndResources: spec.fetch.timeout is the
// Job's activeDeadlineSeconds (a fraction of a second counted as a whole
// one), its resources the fetch container's; without them, an hour and
// the default resources.
func TestSpecFetchSetsTheJobsDeadlineAndResources(t *testing.T) {
	in := Inputs{FetchImage: "example.com/op:2"}
	for _, tc := range []struct {
		name      string
		ms        *servingv1alpha1.ModelServer
		deadline  int64
		resources corev1.ResourceRequirements
	}{
		{"default", modelServer(), 3600, fetchResources()},
		{"timeout", modelServer(withFetch("3h", nil)), 10800, fetchResources()},
		{"a fraction of a second", modelServer(withFetch("90500ms", nil)), 91, fetchResources()},
		{"resources", modelServer(withFetch("", limits("2", "1Gi"))), 3600, *limits("2", "1Gi")},
		{"no resources at all", modelServer(withFetch("", &corev1.ResourceRequirements{})), 3600, corev1.ResourceRequirements{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expectJobSettings(t, tc.ms, in, tc.deadline, tc.resources)
		})
	}
}

// TestSpecFetchIsNotAFetchInput: a change of spec.fetch keeps the fetch
// generation, so it fetches nothing again.
func TestSpecFetchIsNotAFetchInput(t *testing.T) {
	before := modelServer()
	after := modelServer(withFetch("5h", limits("1", "2Gi")))
	if a, b := FetchGeneration(before, *before.Spec.Model), FetchGeneration(after, *after.Spec.Model); a != b {
		t.Errorf("spec.fetch moved the fetch generation from %s to %s", a, b)
	}
}

// TestAnExistingJobKeepsWhatItCannotChange: a Job's pod template cannot
// change, so an existing Job renders with the resources it was made
// with; a running one takes a new deadline, which the apiserver lets
// change, while a finished one keeps its own. Quantities the apiserver
// keeps in its own form ("1" for "1000m") are no change.
func TestAnExistingJobKeepsWhatItCannotChange(t *testing.T) {
	ms := modelServer(withFetch("2h", limits("1000m", "1024Mi")))
	in := Inputs{FetchImage: "example.com/op:2"}
	fresh, err := For(ms, in)
	if err != nil {
		t.Fatal(err)
	}
	generation := fresh.Fetches[0].Generation
	made := FetchSettings{ActiveDeadline: 3600, Resources: fetchResources()}
	for _, tc := range []struct {
		name      string
		live      LiveJob
		deadline  int64
		resources corev1.ResourceRequirements
	}{
		{"running", LiveJob{Settings: made}, 7200, fetchResources()},
		{"finished", LiveJob{Settings: made, Finished: true}, 3600, fetchResources()},
		{"made with the spec's, in the apiserver's form", LiveJob{Settings: FetchSettings{ActiveDeadline: 7200, Resources: *limits("1", "1Gi")}}, 7200, *limits("1000m", "1024Mi")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.live.Program = Program{Image: "example.com/op:1"}
			in.LiveJobs = map[string]LiveJob{generation: tc.live}
			expectJobSettings(t, ms, in, tc.deadline, tc.resources)
		})
	}
}

// TestAFailedJobIsRetriedOnlyForOtherSettings: NeedsRetry compares by
// value.
func TestAFailedJobIsRetriedOnlyForOtherSettings(t *testing.T) {
	made := FetchSettings{ActiveDeadline: 3600, Resources: *limits("1", "1Gi")}
	for _, tc := range []struct {
		name string
		want FetchSettings
		is   bool
	}{
		{"the same, written otherwise", FetchSettings{ActiveDeadline: 3600, Resources: *limits("1000m", "1024Mi")}, false},
		{"more time", FetchSettings{ActiveDeadline: 7200, Resources: *limits("1", "1Gi")}, true},
		{"more memory", FetchSettings{ActiveDeadline: 3600, Resources: *limits("1", "2Gi")}, true},
		{"a request more", FetchSettings{ActiveDeadline: 3600, Resources: corev1.ResourceRequirements{Limits: limits("1", "1Gi").Limits, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}, true},
	} {
		if got := made.NeedsRetry(tc.want); got != tc.is {
			t.Errorf("%s: NeedsRetry = %t, want %t", tc.name, got, tc.is)
		}
	}
}

// TestSpecFetchResourcesTheAPIServerRefuses: the fetch container's
// resources follow the apiserver's rules, the field named.
func TestSpecFetchResourcesTheAPIServerRefuses(t *testing.T) {
	r := &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
	}
	_, err := Validate(modelServer(withFetch("", r)))
	if err == nil || err.Error() != "spec.fetch.resources.requests[memory]: 2Gi: must not exceed the limit, 1Gi" {
		t.Errorf("Validate = %v", err)
	}
}
