package release

import (
	"maps"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	helmcharts "github.com/modelserver-dev/modelserver-operator/helm-charts"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// chartValues returns the embedded chart and the values the operator
// computes for a small ModelServer.
func chartValues(tb testing.TB) (*chart.Chart, map[string]any) {
	tb.Helper()
	ch, err := helmcharts.ModelServer()
	if err != nil {
		tb.Fatal(err)
	}
	ms := &servingv1alpha1.ModelServer{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns", UID: "u"}}
	ms.Spec.Model = &servingv1alpha1.ModelSpec{StorageURI: "s3://models/m"}
	one := int32(1)
	ms.Spec.Replicas = &one
	return ch, valuesOf(tb, ms, nil)
}

// valuesOf returns the values the operator computes for ms once its
// models are fetched, in a cluster that serves the optional kinds apis
// names (values.Inputs.APIs).
func valuesOf(tb testing.TB, ms *servingv1alpha1.ModelServer, apis map[string]bool) map[string]any {
	tb.Helper()
	spec, err := values.Validate(ms)
	if err != nil {
		tb.Fatal(err)
	}
	v, err := spec.Values(values.Inputs{ChartVersion: "0.1.0", AppVersion: "2.19.1", FetchImage: "x", Served: spec.AllFetched(), APIs: apis})
	if err != nil {
		tb.Fatal(err)
	}
	m, err := v.Map()
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// helmCheck is the check Helm's install and upgrade make.
func helmCheck(ch *chart.Chart, vals map[string]any) error {
	_, err := chartutil.ToRenderValuesWithSchemaValidation(ch, vals, chartutil.ReleaseOptions{Name: "m", Namespace: "ns"}, nil, false)
	return err
}

func TestTheCompiledSchemaChecksValuesAsHelmDoes(t *testing.T) {
	ch, good := chartValues(t)
	with := func(edit func(m map[string]any)) map[string]any {
		m := cloneMap(good)
		edit(m)
		return m
	}
	// Each case but the first two is invalid; a key left out takes the
	// chart's default, as in Helm.
	cases := map[string]map[string]any{
		"valid":                             good,
		"a key left to the chart's default": with(func(m map[string]any) { delete(m, "serving") }),
		"a negative replica count": with(func(m map[string]any) {
			m["serving"].(map[string]any)["replicas"] = -1
		}),
		"a Service name that starts with a digit": with(func(m map[string]any) {
			m["names"].(map[string]any)["service"] = "1m"
		}),
		"an unknown key":     with(func(m map[string]any) { m["surprise"] = true }),
		"a string for a map": with(func(m map[string]any) { m["pod"] = "x" }),
	}
	for name, vals := range cases {
		t.Run(name, func(t *testing.T) {
			handled, err := checkValues(ch, vals)
			if !handled {
				t.Fatal("the embedded chart's schema was left to Helm")
			}
			want := helmCheck(ch, vals)
			switch {
			case (err == nil) != (want == nil):
				t.Fatalf("got %v, Helm says %v", err, want)
			case err != nil && err.Error()+"\n" != want.Error():
				t.Fatalf("message differs from Helm's:\n got %q\nwant %q", err, want)
			case err == nil && name != "valid" && name != "a key left to the chart's default":
				t.Fatal("invalid values passed")
			}
		})
	}
}

func TestAChartTheCompiledCheckCannotTakeIsLeftToHelm(t *testing.T) {
	ch, vals := chartValues(t)
	noSchema := *ch
	noSchema.Schema = nil
	if handled, err := checkValues(&noSchema, vals); !handled || err != nil {
		t.Errorf("no schema: handled %v, %v; want handled, nil", handled, err)
	}
	remote := *ch
	remote.Schema = []byte(`{"$ref": "https://example.com/values.json"}`)
	if handled, _ := checkValues(&remote, vals); handled {
		t.Error("a schema that refers to a URL was checked without it")
	}
	parent := *ch
	parent.SetDependencies(&noSchema)
	if handled, _ := checkValues(&parent, vals); handled {
		t.Error("a chart with a subchart was checked without the subchart's schema")
	}
}

func cloneMap(m map[string]any) map[string]any {
	out := maps.Clone(m)
	for k, v := range out {
		if sub, ok := v.(map[string]any); ok {
			out[k] = cloneMap(sub)
		}
	}
	return out
}
