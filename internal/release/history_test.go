package release

import (
	"fmt"
	"io"
	"slices"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
)

// queryCounter counts the lists of release records that reach the store.
type queryCounter struct {
	driver.Driver
	queries int
}

func (q *queryCounter) Query(labels map[string]string) ([]*helmrelease.Release, error) {
	q.queries++
	return q.Driver.Query(labels)
}

// upgradeWith runs a Helm upgrade of the release "resnet" in a store that
// already holds revisions deployed, one after another, and returns the
// revisions and statuses the store ends with, and the lists it was asked
// for. With known, Helm's reads come from the revisions as Get reads them.
func upgradeWith(t *testing.T, revisions int, known bool) ([]string, int) {
	t.Helper()
	ch := &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "resnet", Version: "0.1.0"},
		Templates: []*chart.File{{Name: "templates/cm.yaml",
			Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: resnet\ndata:\n  v: {{ .Values.v | quote }}\n")}},
	}
	store := &queryCounter{Driver: driver.NewMemory()}
	for v := 1; v <= revisions; v++ {
		status := helmrelease.StatusSuperseded
		if v == revisions {
			status = helmrelease.StatusDeployed
		}
		rel := &helmrelease.Release{Name: "resnet", Namespace: "ml", Version: v, Chart: ch,
			Info: &helmrelease.Info{Status: status}, Config: map[string]any{"v": v}}
		if err := store.Create(fmt.Sprintf("sh.helm.release.v1.resnet.v%d", v), rel); err != nil {
			t.Fatal(err)
		}
	}
	cfg := &action.Configuration{
		Releases:     storage.Init(store),
		KubeClient:   &kubefake.PrintingKubeClient{Out: io.Discard},
		Capabilities: chartutil.DefaultCapabilities,
		Log:          func(string, ...any) {},
	}
	history, err := cfg.Releases.History("resnet")
	if err != nil {
		t.Fatal(err)
	}
	store.queries = 0
	if known {
		cfg.Releases.Driver = newKnownHistory(cfg.Releases.Driver, latestOf(history))
	}
	up := action.NewUpgrade(cfg)
	up.Namespace, up.MaxHistory = "ml", 3
	if _, err := up.Run("resnet", ch, map[string]any{"v": "next"}); err != nil {
		t.Fatal(err)
	}
	left, err := store.Driver.Query(map[string]string{"name": "resnet", "owner": "helm"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range left {
		got = append(got, fmt.Sprintf("v%d %s", r.Version, r.Info.Status))
	}
	slices.Sort(got)
	return got, store.queries
}

// TestAnUpgradeFromTheKnownHistoryListsNothingAndLeavesWhatHelmLeaves: the
// store ends as Helm's own reads leave it (the previous revision
// superseded, the new one deployed, the oldest pruned past MaxHistory),
// with no list of the release's records.
func TestAnUpgradeFromTheKnownHistoryListsNothingAndLeavesWhatHelmLeaves(t *testing.T) {
	for _, revisions := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d revisions before", revisions), func(t *testing.T) {
			want, helmLists := upgradeWith(t, revisions, false)
			got, lists := upgradeWith(t, revisions, true)
			if !slices.Equal(got, want) {
				t.Errorf("the store holds %v, Helm's own reads leave %v", got, want)
			}
			if lists != 0 {
				t.Errorf("%d lists of the release's records, want 0 (Helm's own reads make %d)", lists, helmLists)
			}
			t.Logf("%v; Helm's own reads list the records %d times", got, helmLists)
		})
	}
}

func TestLatestIsTheHighestRevisionWhateverTheOrder(t *testing.T) {
	if l := latestOf(nil); l != nil {
		t.Errorf("latestOf(none) = %v", l)
	}
	l := latestOf([]*helmrelease.Release{revision(2, helmrelease.StatusSuperseded), revision(3, helmrelease.StatusDeployed), revision(1, helmrelease.StatusSuperseded)})
	if l.Version != 3 || len(l.revisions) != 3 {
		t.Errorf("latest v%d of %d revisions, want v3 of 3", l.Version, len(l.revisions))
	}
}
