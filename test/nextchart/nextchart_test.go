package nextchart

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"

	helmcharts "github.com/modelserver-dev/modelserver-operator/helm-charts"
)

// thisChartsTree copies this tree's chart into a tree of its own, and
// returns that tree's root and the compiled-in chart.
func thisChartsTree(t *testing.T) (string, *chart.Chart) {
	t.Helper()
	src := t.TempDir()
	if err := CopyTree(filepath.Join("..", "..", "helm-charts"), filepath.Join(src, "helm-charts")); err != nil {
		t.Fatal(err)
	}
	this, err := helmcharts.ModelServer()
	if err != nil {
		t.Fatal(err)
	}
	return src, this
}

// chartIn loads the chart of the tree at src from its directory.
func chartIn(t *testing.T, src string) *chart.Chart {
	t.Helper()
	ch, err := loader.LoadDir(filepath.Join(src, "helm-charts", "modelserver"))
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func TestChangeGivesAChartOfTheNewVersionWhoseServiceCarriesIt(t *testing.T) {
	src, this := thisChartsTree(t)
	// Else a fingerprint that differs below says nothing of the change.
	if helmcharts.Fingerprint(chartIn(t, src)) != helmcharts.Fingerprint(this) {
		t.Fatal("the copy of this chart, loaded from its directory, has a fingerprint other than the compiled-in chart's")
	}
	if err := Change(src, this.Metadata.Version, "9.9.9"); err != nil {
		t.Fatal(err)
	}
	after := chartIn(t, src)
	if after.Metadata.Version != "9.9.9" {
		t.Errorf("version %q after the change, want 9.9.9", after.Metadata.Version)
	}
	if helmcharts.Fingerprint(after) == helmcharts.Fingerprint(this) {
		t.Error("the changed chart has the fingerprint of this one")
	}
	service, err := os.ReadFile(filepath.Join(src, "helm-charts", "modelserver", "templates", "service.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(service), VersionAnnotation+": {{ .Chart.Version | quote }}") {
		t.Errorf("the Service template does not carry %s:\n%s", VersionAnnotation, service)
	}
}

// A build whose templates changed at the same chart version is an upgrade
// too: its fingerprint differs.
func TestChangeAtTheSameVersionChangesOnlyTheTemplates(t *testing.T) {
	src, this := thisChartsTree(t)
	current := this.Metadata.Version
	if err := Change(src, current, current); err != nil {
		t.Fatal(err)
	}
	after := chartIn(t, src)
	if after.Metadata.Version != current || helmcharts.Fingerprint(after) == helmcharts.Fingerprint(this) {
		t.Errorf("version %q (want %q) and fingerprint %s (want other than %s)",
			after.Metadata.Version, current, helmcharts.Fingerprint(after), helmcharts.Fingerprint(this))
	}
}

// A chart that has moved on from what Change expects fails loudly instead
// of passing unchanged.
func TestChangeFailsOnAChartItDoesNotKnow(t *testing.T) {
	src, this := thisChartsTree(t)
	if err := Change(src, this.Metadata.Version, "9.9.9"); err != nil {
		t.Fatal(err)
	}
	err := Change(src, "9.9.9", "9.9.10")
	if err == nil || !strings.Contains(err.Error(), "service.yaml") || !strings.Contains(err.Error(), "found 0") {
		t.Fatalf("a second change: %v, want the Service template named and found 0", err)
	}
}
