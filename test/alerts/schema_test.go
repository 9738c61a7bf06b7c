package alerts

import (
	"errors"
	"os"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	grafana "github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// Grafana's own dashboard schema (its foundation SDK's types, generated
// from it) takes the dashboard whole: every field it has is one the schema
// has, of its type, with every field the schema requires, panels' options
// by their panel type's schema and queries by Prometheus's.
func TestGrafanasSchemaTakesTheDashboard(t *testing.T) {
	plugins.RegisterDefaultPlugins()
	raw, err := os.ReadFile("../../config/grafana/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	// The classic JSON model, which Grafana imports and its sidecar loads;
	// the v2 schema is that of the dashboard.grafana.app API.
	var d grafana.Dashboard //nolint:staticcheck // deprecated for the v2 API, still the model of dashboard JSON files
	if err := schemaErrors(d.UnmarshalJSONStrict(raw)); err != nil {
		t.Fatalf("Grafana's dashboard schema refuses dashboard.json: %v", err)
	}
	if err := schemaErrors(d.Validate()); err != nil {
		t.Errorf("Grafana's dashboard schema: %v", err)
	}
	if len(d.Panels) != len(readDashboard(t).Panels) {
		t.Errorf("the schema reads %d panels, the tests %d", len(d.Panels), len(readDashboard(t).Panels))
	}
}

// schemaErrors is the SDK's error, or nil for an empty list of them: it
// returns its list as an error even when it is empty.
func schemaErrors(err error) error {
	var list cog.BuildErrors
	if errors.As(err, &list) && len(list) == 0 {
		return nil
	}
	return err
}
