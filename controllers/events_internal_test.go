package controllers

import (
	"strings"
	"testing"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// TestTheReadyEventSaysARefetchLeftThePodsAlone: a model fetched again
// unchanged is named as such, so that no pod replaced is not a surprise.
func TestTheReadyEventSaysARefetchLeftThePodsAlone(t *testing.T) {
	st := servingv1alpha1.ModelServerStatus{
		Ready:     "2/2",
		Endpoints: &servingv1alpha1.Endpoints{REST: "http://resnet.ml.svc:8501/v1/models/resnet"},
		Model:     &servingv1alpha1.ModelStatus{Name: "resnet", Digest: "sha256:aa", SizeBytes: 2048, Versions: []int64{1}, FetchedGeneration: "g2"},
	}
	fresh := phaseNote(servingv1alpha1.PhaseFetching, servingv1alpha1.PhaseReady, st)
	st.Model.ServedGeneration = "g1"
	kept := phaseNote(servingv1alpha1.PhaseFetching, servingv1alpha1.PhaseReady, st)
	if strings.Contains(fresh, "unchanged") || !strings.Contains(kept, "fetched again unchanged: the pods kept their copy") {
		t.Errorf("Ready Events:\n%s\n%s", fresh, kept)
	}
}
