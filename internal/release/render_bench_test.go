package release

import (
	"context"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
)

// schemaCheck is how a benchmarked render checks the values.
type schemaCheck int

const (
	helmCompilesEachTime schemaCheck = iota // Helm's own check
	compiledOnce                            // checkValues, as render does
	noCheck
)

// testKubeVersion is the cluster version a client-only render is told.
var testKubeVersion = chartutil.KubeVersion{Version: "v1.37.2", Major: "1", Minor: "37"}

// clientOnlyInstall renders release m in namespace ns as render sets up a
// fresh install, without a cluster.
func clientOnlyInstall() *action.Install {
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.ClientOnly, install.DryRun = true, true
	install.ReleaseName, install.Namespace = "m", "ns"
	install.KubeVersion = &testKubeVersion
	install.DisableOpenAPIValidation = true
	return install
}

// benchRender times the client-side render a fresh install does, as
// render sets it up, with the values checked against values.schema.json
// by Helm (which compiles the schema anew for every render), by the
// schema compiled once, or not at all.
func benchRender(b *testing.B, check schemaCheck) {
	ch, m := chartValues(b)
	for b.Loop() {
		install := clientOnlyInstall()
		switch check {
		case compiledOnce:
			handled, err := checkValues(ch, m)
			if err != nil || !handled {
				b.Fatal(handled, err)
			}
			install.SkipSchemaValidation = true
		case noCheck:
			install.SkipSchemaValidation = true
		}
		if _, err := install.RunWithContext(context.Background(), ch, m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRenderHelmChecksSchema(b *testing.B)   { benchRender(b, helmCompilesEachTime) }
func BenchmarkRenderSchemaCompiledOnce(b *testing.B) { benchRender(b, compiledOnce) }
func BenchmarkRenderWithoutSchemaCheck(b *testing.B) { benchRender(b, noCheck) }
