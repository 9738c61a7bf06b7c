package release

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"sigs.k8s.io/yaml"
)

// parsedTemplates are a chart's templates parsed once, to be executed for
// every release of the chart.
//
// Helm's engine parses every template of the chart anew for each render:
// for the operator, which renders the same embedded chart for every
// ModelServer, that was an eighth of a render's time and as much again in
// garbage. Executing the same parse trees with the same functions gives
// the same text. What this does not do as Helm's engine does, it does
// not do at all: a chart that reads .Files, or calls a function defined
// here by nobody (tpl, required, lookup, toJson, …), or whose render
// fails in any way, is rendered by Helm's engine, whose text and errors
// are then Helm's. TestTemplatesParsedOnceRenderAsHelms holds the two to
// the same text.
type parsedTemplates struct {
	set      *template.Template
	files    []string // the templates to execute: all but partials
	basePath string
}

// maxIncludeDepth bounds include's nesting, as Helm's engine bounds it,
// so that a template that includes itself fails instead of overflowing
// the stack.
const maxIncludeDepth = 1000

var errIncludeDepth = errors.New("include nested too deep")

// templateFuncs are the functions of Helm's engine that behave the same
// whatever the release: sprig's, less the environment's and those Helm
// replaces with its own, and toYaml. include is bound per render.
func templateFuncs() template.FuncMap {
	f := sprig.TxtFuncMap()
	for _, name := range []string{"env", "expandenv", "getHostByName", "fail", "toJson", "fromJson"} {
		delete(f, name)
	}
	f["toYaml"] = toYAML
	f["include"] = func(string, any) (string, error) { return "", errors.New("include is bound per render") }
	return f
}

// toYAML is Helm's toYaml: the value as YAML without its final newline,
// or nothing if it does not marshal.
func toYAML(v any) string {
	out, err := yaml.Marshal(v)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(out), "\n")
}

// parseTemplates parses ch's templates in the order Helm's engine parses
// them (the deepest paths first, then by name, reversed), which decides
// which of two same-named defines wins. It returns nil for a chart this
// path leaves to Helm's engine.
func parseTemplates(ch *chart.Chart) *parsedTemplates {
	if len(ch.Dependencies()) > 0 || strings.EqualFold(ch.Metadata.Type, "library") {
		return nil
	}
	base := ch.ChartFullPath()
	texts := map[string]string{}
	for _, t := range ch.Templates {
		if t == nil {
			continue
		}
		text := string(t.Data)
		if strings.Contains(text, ".Files") {
			return nil
		}
		texts[path.Join(base, t.Name)] = text
	}
	names := slices.Collect(maps.Keys(texts))
	slices.SortFunc(names, func(a, b string) int {
		if da, db := strings.Count(a, "/"), strings.Count(b, "/"); da != db {
			return db - da
		}
		return strings.Compare(b, a)
	})

	set := template.New("gotpl").Option("missingkey=zero").Funcs(templateFuncs())
	p := &parsedTemplates{set: set, basePath: path.Join(base, "templates")}
	for _, name := range names {
		if _, err := set.New(name).Parse(texts[name]); err != nil {
			return nil
		}
		if !strings.HasPrefix(path.Base(name), "_") {
			p.files = append(p.files, name)
		}
	}
	return p
}

// render executes the templates for one release, as Helm's engine
// would with vals (chartutil.ToRenderValues's). ok is false if any
// template fails: Helm's engine is then left to make the error.
func (p *parsedTemplates) render(ch *chart.Chart, vals chartutil.Values) (_ map[string]string, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	t, err := p.set.Clone()
	if err != nil {
		return nil, false
	}
	depth := 0
	t.Funcs(template.FuncMap{"include": func(name string, data any) (string, error) {
		if depth >= maxIncludeDepth {
			return "", fmt.Errorf("%w: %s", errIncludeDepth, name)
		}
		depth++
		defer func() { depth-- }()
		var out strings.Builder
		err := t.ExecuteTemplate(&out, name, data)
		return out.String(), err
	}})
	top := map[string]any{
		"Chart": struct {
			chart.Metadata
			IsRoot bool
		}{*ch.Metadata, ch.IsRoot()},
		"Release":      vals["Release"],
		"Capabilities": vals["Capabilities"],
		"Values":       vals["Values"],
		"Subcharts":    map[string]any{},
	}
	rendered := make(map[string]string, len(p.files))
	var out strings.Builder
	for _, name := range p.files {
		top["Template"] = chartutil.Values{"Name": name, "BasePath": p.basePath}
		out.Reset()
		if err := t.ExecuteTemplate(&out, name, top); err != nil {
			return nil, false
		}
		// missingkey=zero still prints "<no value>" for a missing key of a
		// map of interfaces; Helm's engine removes it.
		rendered[name] = strings.ReplaceAll(out.String(), "<no value>", "")
	}
	return rendered, true
}

// chartTemplates caches each chart's parsed templates (nil: left to
// Helm's engine) by the chart's identity: the operator loads its chart
// once.
type chartTemplates struct{ m sync.Map }

func (c *chartTemplates) of(ch *chart.Chart) *parsedTemplates {
	if p, ok := c.m.Load(ch); ok {
		return p.(*parsedTemplates)
	}
	p, _ := c.m.LoadOrStore(ch, parseTemplates(ch))
	return p.(*parsedTemplates)
}
