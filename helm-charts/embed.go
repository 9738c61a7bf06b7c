// Package helmcharts embeds the operator's Helm chart, modelserver, which
// renders a ModelServer's TensorFlow Serving stack from the values that
// package internal/values computes.
package helmcharts

import (
	"embed"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
)

// ChartName is the name of the embedded chart, and the directory it is in.
const ChartName = "modelserver"

// The all: prefix keeps templates/_helpers.tpl, which a plain pattern
// would leave out for its leading underscore.
//
//go:embed all:modelserver
var files embed.FS

var (
	loadOnce sync.Once
	loaded   *chart.Chart
	loadErr  error
)

// ModelServer returns the embedded modelserver chart. The chart is read and
// checked once; every call returns a copy of its own, since Helm's install
// and upgrade actions write to the chart they are given (its values, its
// dependencies). The copies share the files' contents: do not modify the
// Data of its files.
func ModelServer() (*chart.Chart, error) {
	loadOnce.Do(func() { loaded, loadErr = load() })
	if loadErr != nil {
		return nil, loadErr
	}
	return clone(loaded), nil
}

// Render renders the embedded chart with values for a release named
// releaseName in namespace, as `helm template` would: values are merged
// into the chart's defaults (values.yaml) and checked against
// values.schema.json first. The result maps each template's path, such as
// "modelserver/templates/deployment.yaml", to its rendered text; a template
// that renders nothing (pvc.yaml for an existing claim) maps to blank text,
// and "modelserver/templates/NOTES.txt" is included.
func Render(values map[string]any, releaseName, namespace string) (map[string]string, error) {
	c, err := ModelServer()
	if err != nil {
		return nil, err
	}
	options := chartutil.ReleaseOptions{
		Name:      releaseName,
		Namespace: namespace,
		Revision:  1,
		IsInstall: true,
	}
	top, err := chartutil.ToRenderValues(c, values, options, nil)
	if err != nil {
		return nil, fmt.Errorf("chart %s: values: %w", ChartName, err)
	}
	out, err := engine.Render(c, top)
	if err != nil {
		return nil, fmt.Errorf("chart %s: render: %w", ChartName, err)
	}
	return out, nil
}

// load reads the chart from the embedded files.
func load() (*chart.Chart, error) {
	var buffered []*loader.BufferedFile
	err := fs.WalkDir(files, ChartName, func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := files.ReadFile(name)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(name, ChartName+"/")
		buffered = append(buffered, &loader.BufferedFile{Name: path.Clean(rel), Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read embedded chart %s: %w", ChartName, err)
	}
	c, err := loader.LoadFiles(buffered)
	if err != nil {
		return nil, fmt.Errorf("load embedded chart %s: %w", ChartName, err)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("embedded chart %s: %w", ChartName, err)
	}
	return c, nil
}

// clone copies c deeply enough that what Helm's actions write (values,
// metadata, dependencies, the file lists) does not reach c. The chart has
// no dependencies, so none are copied.
func clone(c *chart.Chart) *chart.Chart {
	md := *c.Metadata
	md.Sources = slices.Clone(md.Sources)
	md.Keywords = slices.Clone(md.Keywords)
	md.Annotations = maps.Clone(md.Annotations)
	md.Maintainers = cloneEach(md.Maintainers)
	md.Dependencies = cloneEach(md.Dependencies)
	return &chart.Chart{
		Raw:       cloneEach(c.Raw),
		Metadata:  &md,
		Templates: cloneEach(c.Templates),
		Values:    cloneValues(c.Values),
		Schema:    slices.Clone(c.Schema),
		Files:     cloneEach(c.Files),
	}
}

// cloneEach copies a list of pointers and the structs they point to.
func cloneEach[T any](in []*T) []*T {
	if in == nil {
		return nil
	}
	out := make([]*T, len(in))
	for i, p := range in {
		if p != nil {
			v := *p
			out[i] = &v
		}
	}
	return out
}

// cloneValues deeply copies values as the YAML and JSON decoders make
// them: maps, lists and scalars.
func cloneValues(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return cloneValues(v)
	case chartutil.Values:
		return chartutil.Values(cloneValues(v))
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = cloneValue(e)
		}
		return out
	default:
		return v
	}
}
