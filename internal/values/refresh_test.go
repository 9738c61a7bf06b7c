package values

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

func TestDueRound(t *testing.T) {
	created := time.Date(2026, 12, 6, 4, 0, 7, 0, time.UTC)
	at := func(d time.Duration) time.Time { return created.Add(d) }
	for _, tc := range []struct {
		name      string
		last, now time.Time
		interval  time.Duration
		want      time.Time
	}{
		{"no refresh", at(time.Hour), at(5 * time.Hour), 0, at(time.Hour)},
		{"first round: the creation's", time.Time{}, at(time.Minute), time.Hour, created},
		{"refresh set long after the creation", time.Time{}, at(50 * time.Hour), 7 * time.Hour, at(49 * time.Hour)},
		{"the round still in force", at(time.Hour), at(119 * time.Minute), time.Hour, at(time.Hour)},
		{"the next round, on the dot", at(time.Hour), at(2 * time.Hour), time.Hour, at(2 * time.Hour)},
		{"rounds missed: only the newest", at(time.Hour), at(5*time.Hour + 30*time.Minute), time.Hour, at(5 * time.Hour)},
		{"an interval shortened", at(time.Hour), at(70 * time.Minute), 15 * time.Minute, at(60 * time.Minute)},
		{"a clock behind the creation", time.Time{}, at(-time.Minute), time.Hour, created},
		{"an interval of a fraction of a second", time.Time{}, at(2500 * time.Millisecond), 1500 * time.Millisecond, at(1500 * time.Millisecond).Truncate(time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DueRound(created, tc.last, tc.now, tc.interval); !got.Equal(tc.want) {
				t.Errorf("DueRound = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestARoundIsPartOfTheGenerationNotOfTheBase: each round is a fetch of
// its own, of the same inputs.
func TestARoundIsPartOfTheGenerationNotOfTheBase(t *testing.T) {
	ms := modelServer(func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Model.RefreshInterval = &metav1.Duration{Duration: time.Hour}
	})
	spec, err := Validate(ms)
	if err != nil {
		t.Fatal(err)
	}
	base := spec.Models[0].Generation
	if base != FetchGeneration(ms, *ms.Spec.Model) || spec.Models[0].BaseGeneration != base {
		t.Fatalf("generation %s, base %s: without a round, both are the inputs'", base, spec.Models[0].BaseGeneration)
	}
	round := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	seen := map[string]bool{base: true}
	for _, r := range []time.Time{round, round.Add(time.Hour)} {
		spec.InRound(0, r)
		m := spec.Models[0]
		if seen[m.Generation] || m.BaseGeneration != base || m.FetchJob != "resnet-fetch-"+m.Generation {
			t.Errorf("round %s: generation %s, base %s, Job %s; want a generation of its own, the base, and its Job", r, m.Generation, m.BaseGeneration, m.FetchJob)
		}
		seen[m.Generation] = true
	}
	spec.InRound(0, time.Time{})
	if spec.Models[0].Generation != base {
		t.Errorf("no round: generation %s, want the inputs' %s", spec.Models[0].Generation, base)
	}
}

func TestAModelThatCannotChangeIsNotRefreshed(t *testing.T) {
	for _, uri := range []string{
		"pvc://shared/resnet",
		"oci://registry.example/models/resnet@sha256:" + strings.Repeat("ab", 32),
		"oci://registry.example/models/resnet:v1@sha256:" + strings.Repeat("ab", 32),
		"https://models.example/resnet.tar.gz#sha256=" + strings.Repeat("ab", 32),
		"s3://models/resnet.tar.gz#sha256=" + strings.Repeat("ab", 32),
	} {
		ms := modelServer(func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.StorageURI = uri
			ms.Spec.Model.RefreshInterval = &metav1.Duration{Duration: time.Hour}
		})
		_, err := Validate(ms)
		var verr *Error
		if !errors.As(err, &verr) || verr.Field != "spec.model.refreshInterval" {
			t.Errorf("%s: error %v, want one naming spec.model.refreshInterval", uri, err)
		}
	}
	for _, uri := range []string{"oci://registry.example/models/resnet:v1", "https://models.example/resnet.tar.gz", "gs://models/resnet"} {
		ms := modelServer(func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.StorageURI = uri
			ms.Spec.Model.RefreshInterval = &metav1.Duration{Duration: time.Hour}
		})
		if _, err := Validate(ms); err != nil {
			t.Errorf("%s: %v, want it refreshed", uri, err)
		}
	}
}
