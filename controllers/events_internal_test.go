package controllers

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/tools/events"

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

// TestAWayInIsToldOfOnceAndAgainAtANewAddress: the Exposed Event marks
// the status's first listing of a way in from outside, and a new
// address, NoLongerExposed its end; a status that lists the same again
// tells nothing.
func TestAWayInIsToldOfOnceAndAgainAtANewAddress(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	r := &ModelServerReconciler{Recorder: rec}
	ms := &servingv1alpha1.ModelServer{}
	listing := func(eps ...servingv1alpha1.ExternalEndpoint) servingv1alpha1.ModelServerStatus {
		return servingv1alpha1.ModelServerStatus{Endpoints: &servingv1alpha1.Endpoints{REST: "http://resnet.ml.svc:8501/v1/models/resnet", External: eps}}
	}
	gateway := servingv1alpha1.ExternalEndpoint{Via: "Gateway infra/public", REST: "https://models.example.com/v1/models/resnet", GRPC: "models.example.com:443"}
	balancer := servingv1alpha1.ExternalEndpoint{Via: "LoadBalancer", REST: "http://198.18.0.50:8501/v1/models/resnet"}
	moved := balancer
	moved.REST = "http://198.18.0.51:8501/v1/models/resnet"
	for _, step := range []struct {
		what     string
		old, now servingv1alpha1.ModelServerStatus
		want     []string
	}{
		{"none yet", servingv1alpha1.ModelServerStatus{}, listing(), nil},
		{"a Gateway's", listing(), listing(gateway),
			[]string{"Normal Exposed Reachable from outside the cluster through Gateway infra/public: REST API at https://models.example.com/v1/models/resnet, gRPC API at models.example.com:443."}},
		{"the same again, a load balancer's too", listing(gateway), listing(gateway, balancer),
			[]string{"Normal Exposed Reachable from outside the cluster through LoadBalancer: REST API at http://198.18.0.50:8501/v1/models/resnet."}},
		{"the same again", listing(gateway, balancer), listing(gateway, balancer), nil},
		{"a new address", listing(gateway, balancer), listing(gateway, moved),
			[]string{"Normal Exposed Reachable from outside the cluster through LoadBalancer: REST API at http://198.18.0.51:8501/v1/models/resnet."}},
		{"one gone", listing(gateway, moved), listing(gateway),
			[]string{"Normal NoLongerExposed No longer reachable from outside the cluster through LoadBalancer."}},
		{"a spec the operator cannot deploy: nothing known", listing(gateway), servingv1alpha1.ModelServerStatus{}, nil},
		{"the last gone", listing(gateway), listing(), []string{"Normal NoLongerExposed No longer reachable from outside the cluster through Gateway infra/public."}},
	} {
		r.exposedEvents(ms, step.old, step.now)
		var got []string
		for len(rec.Events) > 0 {
			got = append(got, <-rec.Events)
		}
		if !slices.Equal(got, step.want) {
			t.Errorf("%s: Events %q, want %q", step.what, got, step.want)
		}
	}
}
