package release

import (
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
)

// TestARecordIsStoredWithoutTheTemplatesWhileHelmKeepsThem: the store gets
// the chart without templates and schema, with everything else; the
// release Helm holds, and goes on writing, keeps its whole chart.
func TestARecordIsStoredWithoutTheTemplatesWhileHelmKeepsThem(t *testing.T) {
	ch, _ := chartValues(t)
	rls := revision(1, helmrelease.StatusDeployed)
	rls.Chart, rls.Manifest = ch, "kind: Deployment"
	store := driver.NewMemory()
	d := chartByVersion{store}
	key := "sh.helm.release.v1.resnet.v1"

	for _, write := range []func(string, *helmrelease.Release) error{d.Create, d.Update} {
		if err := write(key, rls); err != nil {
			t.Fatal(err)
		}
		got, err := store.Get(key)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Chart.Templates) != 0 || got.Chart.Schema != nil {
			t.Errorf("stored %d templates and a %d-byte schema, want neither", len(got.Chart.Templates), len(got.Chart.Schema))
		}
		if got.Chart.Metadata != ch.Metadata || len(got.Chart.Values) != len(ch.Values) || got.Manifest != rls.Manifest {
			t.Errorf("stored chart %v with %d values and manifest %q; want the release's", got.Chart.Metadata, len(got.Chart.Values), got.Manifest)
		}
		if rls.Chart != ch || len(ch.Templates) == 0 || ch.Schema == nil {
			t.Fatal("the release Helm holds lost its chart's templates or schema")
		}
	}

	bare := revision(2, helmrelease.StatusDeployed)
	bare.Chart = &chart.Chart{Metadata: ch.Metadata}
	if withoutTemplates(bare) != bare {
		t.Error("a chart with nothing to leave out was copied")
	}
}
