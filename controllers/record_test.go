package controllers_test

import (
	"context"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	helmrelease "helm.sh/helm/v3/pkg/release"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelserver-dev/modelserver-operator/internal/names"
)

// The operator's release records leave out the chart's templates and
// schema, and Helm's own commands still work on them: `helm get values
// --all` and `helm rollback` from the records alone, after which the
// operator upgrades the release back to the spec.
func TestHelmRollsBackTheOperatorsReleasesFromTheirRecords(t *testing.T) {
	ctx := context.Background()
	r := newProcessReconciler(t, nil)
	ms := createUnmanaged(t, "rollback")
	ns := ms.Namespace
	reconcileUntilReady(t, r, ms)
	image := func() string {
		return get(t, ns, names.Deployment("rollback"), &appsv1.Deployment{}).Spec.Template.Spec.Containers[0].Image
	}
	first := image()
	patch := client.MergeFrom(ms.DeepCopy())
	ms.Spec.Image = "tensorflow/serving:2.18.0"
	if err := env.client.Patch(ctx, ms, patch); err != nil {
		t.Fatal(err)
	}
	if rev := reconcileUntilReady(t, r, ms).Status.Release.Revision; rev != 2 {
		t.Fatalf("revision %d after an image change, want 2", rev)
	}

	cfg := helmConfig(t, ns)
	for _, s := range releaseSecrets(t, ns, "rollback") {
		t.Logf("record %s: %d bytes", s.Name, len(s.Data["release"]))
	}
	stored, err := cfg.Releases.Get("rollback", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored.Chart.Templates) != 0 || stored.Chart.Schema != nil {
		t.Errorf("the record keeps %d templates and a %d-byte schema, want neither", len(stored.Chart.Templates), len(stored.Chart.Schema))
	}
	if stored.Chart.Metadata.Version != r.Chart.Metadata.Version || !strings.Contains(stored.Manifest, ms.Spec.Image) {
		t.Errorf("the record names chart %s and a manifest without %s", stored.Chart.Metadata.Version, ms.Spec.Image)
	}
	get := action.NewGetValues(cfg)
	get.AllValues = true
	all, err := get.Run("rollback")
	if err != nil {
		t.Fatal(err)
	}
	for key := range r.Chart.Values {
		if _, ok := all[key]; !ok {
			t.Errorf("helm get values --all lacks the chart's default %q", key)
		}
	}

	rollback := action.NewRollback(cfg)
	rollback.Version = 1
	if err := rollback.Run("rollback"); err != nil {
		t.Fatalf("helm rollback to revision 1: %v", err)
	}
	if got := image(); got != first {
		t.Errorf("image %s after the rollback, want revision 1's %s", got, first)
	}
	last, err := cfg.Releases.Last("rollback")
	if err != nil || last.Version != 3 || last.Info.Status != helmrelease.StatusDeployed {
		t.Fatalf("after the rollback the latest record is %v, %v; want revision 3 deployed", last, err)
	}

	back := reconcileUntilReady(t, r, ms)
	if got := image(); got != ms.Spec.Image || back.Status.Release.Revision != 4 {
		t.Errorf("the operator left image %s at revision %d, want %s at revision 4", got, back.Status.Release.Revision, ms.Spec.Image)
	}
}
