package release

import (
	"context"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	helmcharts "github.com/modelserver-dev/modelserver-operator/helm-charts"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// benchRender times the client-side render a fresh install does, as
// render sets it up, with or without Helm's check of the values against
// values.schema.json: Helm compiles the schema anew for every render.
func benchRender(b *testing.B, skipSchema bool) {
	ch, err := helmcharts.ModelServer()
	if err != nil {
		b.Fatal(err)
	}
	ms := &servingv1alpha1.ModelServer{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns", UID: "u"}}
	ms.Spec.Model = &servingv1alpha1.ModelSpec{StorageURI: "s3://models/m"}
	one := int32(1)
	ms.Spec.Replicas = &one
	spec, err := values.Validate(ms)
	if err != nil {
		b.Fatal(err)
	}
	v, err := spec.Values(values.Inputs{ChartVersion: "0.1.0", AppVersion: "2.19.1", FetchImage: "x", Served: spec.AllFetched()})
	if err != nil {
		b.Fatal(err)
	}
	m, _ := v.Map()
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = chartutil.KubeVersion{Version: "v1.37.2", Major: "1", Minor: "37"}
	for b.Loop() {
		install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
		install.ClientOnly, install.DryRun = true, true
		install.ReleaseName, install.Namespace = "m", "ns"
		install.KubeVersion = &caps.KubeVersion
		install.DisableOpenAPIValidation = true
		install.SkipSchemaValidation = skipSchema
		if _, err := install.RunWithContext(context.Background(), ch, m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRenderAsInstalled(b *testing.B)        { benchRender(b, false) }
func BenchmarkRenderWithoutSchemaCheck(b *testing.B) { benchRender(b, true) }
