package helmcharts_test

import (
	"slices"
	"testing"

	"helm.sh/helm/v3/pkg/chart"

	helmcharts "github.com/modelserver-dev/modelserver-operator/helm-charts"
)

// TestFingerprintFollowsEveryPartOfTheChart: a release is upgraded when its
// chart's fingerprint changes, so a change anywhere in the chart must
// change it, even with the version left as it was.
func TestFingerprintFollowsEveryPartOfTheChart(t *testing.T) {
	base := fingerprint(t, func(*chart.Chart) {})
	if again := fingerprint(t, func(*chart.Chart) {}); again != base {
		t.Fatalf("two loads of one chart: %s and %s", base, again)
	}
	for name, change := range map[string]func(c *chart.Chart){
		"a template": func(c *chart.Chart) {
			i := slices.IndexFunc(c.Templates, func(f *chart.File) bool { return f.Name == "templates/service.yaml" })
			c.Templates[i] = &chart.File{Name: c.Templates[i].Name, Data: append(slices.Clone(c.Templates[i].Data), "\n# changed\n"...)}
		},
		"a template's name": func(c *chart.Chart) {
			c.Templates[0] = &chart.File{Name: c.Templates[0].Name + ".old", Data: c.Templates[0].Data}
		},
		"a template added": func(c *chart.Chart) {
			c.Templates = append(c.Templates, &chart.File{Name: "templates/extra.yaml"})
		},
		"the version":     func(c *chart.Chart) { c.Metadata.Version = "0.1.1" },
		"the app version": func(c *chart.Chart) { c.Metadata.AppVersion = "2.19.2" },
		"a default value": func(c *chart.Chart) { c.Values["serving"].(map[string]any)["replicas"] = 7 },
		"the schema":      func(c *chart.Chart) { c.Schema = append(slices.Clone(c.Schema), ' ') },
		"a file":          func(c *chart.Chart) { c.Files = append(c.Files, &chart.File{Name: "README.md"}) },
	} {
		if got := fingerprint(t, change); got == base {
			t.Errorf("%s changed, the fingerprint stayed %s", name, got)
		}
	}
}

// TestFingerprintIgnoresTheOrderOfTemplates: the loader's order is not
// part of the chart.
func TestFingerprintIgnoresTheOrderOfTemplates(t *testing.T) {
	base := fingerprint(t, func(*chart.Chart) {})
	if got := fingerprint(t, func(c *chart.Chart) { slices.Reverse(c.Templates) }); got != base {
		t.Errorf("reordered templates: %s, want %s", got, base)
	}
}

func fingerprint(t *testing.T, change func(*chart.Chart)) string {
	t.Helper()
	c, err := helmcharts.ModelServer()
	if err != nil {
		t.Fatal(err)
	}
	change(c)
	return helmcharts.Fingerprint(c)
}
