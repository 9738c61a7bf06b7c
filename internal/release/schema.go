package release

import (
	"bytes"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
)

// Helm checks the values of every install and upgrade against the chart's
// values.schema.json, and compiles the schema anew each time: a render
// took 5.9 ms with that, 3.9 ms with the schema compiled once
// (render_bench_test.go), and allocated 2.5 MB against 1.5. The chart is
// the same for every release, so its schema is compiled once here and the
// values checked against it before Helm is asked, with Helm's own check
// skipped.
//
// The check is Helm's: the values merged into the chart's defaults, one
// schema, and the error worded as Helm words it. A chart this cannot
// check the same way (one with subcharts, or a schema that does not
// compile here) is left to Helm.

// schemaURL names the schema to the compiler, as Helm names it, so that
// relative references and the messages read the same.
const schemaURL = "file:///values.schema.json"

// compiledSchemas holds each schema compiled, by its text.
var compiledSchemas sync.Map // string -> *compiledSchema

type compiledSchema struct {
	once   sync.Once
	schema *jsonschema.Schema // nil: left to Helm
}

// checkValues checks vals against ch's schema as Helm's install and
// upgrade would. handled says whether it did: if not, Helm must.
func checkValues(ch *chart.Chart, vals map[string]any) (handled bool, err error) {
	_, handled, err = checkedValues(ch, vals)
	return handled, err
}

// checkedValues is checkValues that also returns vals merged into ch's
// defaults, as it checked them; nil where the chart has no schema, so
// nothing was merged.
func checkedValues(ch *chart.Chart, vals map[string]any) (merged chartutil.Values, handled bool, err error) {
	if len(ch.Dependencies()) > 0 {
		return nil, false, nil
	}
	if ch.Schema == nil {
		return nil, true, nil
	}
	entry, _ := compiledSchemas.LoadOrStore(string(ch.Schema), &compiledSchema{})
	c := entry.(*compiledSchema)
	c.once.Do(func() { c.schema = compile(ch.Schema) })
	if c.schema == nil {
		return nil, false, nil
	}
	merged, err = chartutil.CoalesceValues(ch, vals)
	if err != nil {
		return nil, true, err
	}
	if err := c.schema.Validate(merged.AsMap()); err != nil {
		msg := strings.TrimPrefix(err.Error(), "jsonschema validation failed with '"+schemaURL+"#'\n")
		return nil, true, fmt.Errorf("values don't meet the specifications of the schema(s) in the following chart(s):\n%s:\n%s", ch.Name(), msg)
	}
	return merged, true, nil
}

// compile compiles a schema that refers to nothing outside itself; nil if
// it does not compile so.
func compile(text []byte) *jsonschema.Schema {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(text))
	if err != nil {
		return nil
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{}) // no files, no network
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil
	}
	s, err := c.Compile(schemaURL)
	if err != nil {
		return nil
	}
	return s
}
