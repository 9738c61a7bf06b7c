package release

import (
	"maps"
	"reflect"
	"slices"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
)

// helmRenderValues are the values Helm's engine is given for a first install
// of ch with vals.
func helmRenderValues(tb testing.TB, ch *chart.Chart, vals map[string]any) chartutil.Values {
	tb.Helper()
	caps := clientOnlyCapabilities(&chartutil.Capabilities{KubeVersion: *clientOnlyInstall().KubeVersion})
	options := chartutil.ReleaseOptions{Name: "m", Namespace: "ns", Revision: 1, IsInstall: true}
	out, err := chartutil.ToRenderValuesWithSchemaValidation(ch, vals, options, caps, true)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// The values merged once, as the schema's check merged them, are laid out
// for the render as Helm's ToRenderValues lays out the values it merges
// itself.
func TestRenderValuesAreHelms(t *testing.T) {
	ch, small := chartValues(t)
	caps := clientOnlyCapabilities(&chartutil.Capabilities{KubeVersion: *clientOnlyInstall().KubeVersion})
	options := chartutil.ReleaseOptions{Name: "m", Namespace: "ns", Revision: 1, IsInstall: true}
	for name, vals := range map[string]map[string]any{"small": small, "every kind": fullValues(t)} {
		t.Run(name, func(t *testing.T) {
			merged, handled, err := checkedValues(ch, vals)
			if err != nil || !handled || merged == nil {
				t.Fatalf("checked: %v, %v, merged %v", handled, err, merged != nil)
			}
			got, err := renderValues(ch, merged, options, caps)
			if err != nil {
				t.Fatal(err)
			}
			if want := helmRenderValues(t, ch, vals); !reflect.DeepEqual(got, want) {
				t.Errorf("render values:\n%#v\nHelm's:\n%#v", got, want)
			}
		})
	}
}

// The operator's chart, parsed once and executed for each release, renders
// the text Helm's engine renders, file by file, and again from the same
// parse.
func TestTemplatesParsedOnceRenderAsHelms(t *testing.T) {
	ch, small := chartValues(t)
	parsed := parseTemplates(ch)
	if parsed == nil {
		t.Fatal("the operator's chart is left to Helm's engine")
	}
	for name, vals := range map[string]map[string]any{"small": small, "every kind": fullValues(t), "small again": small} {
		t.Run(name, func(t *testing.T) {
			toRender := helmRenderValues(t, ch, vals)
			want, err := engine.Engine{}.Render(ch, toRender)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := parsed.render(ch, toRender)
			if !ok {
				t.Fatal("the templates parsed once did not render")
			}
			if !maps.Equal(got, want) {
				for file, text := range want {
					if got[file] != text {
						t.Errorf("%s:\n%s\nHelm's:\n%s", file, got[file], text)
					}
				}
				t.Fatalf("files %v, Helm's %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
			}
		})
	}
}

// Every ModelServer's reconcile renders from the same parse at once.
func TestTemplatesParsedOnceRenderConcurrently(t *testing.T) {
	ch, small := chartValues(t)
	parsed := parseTemplates(ch)
	if parsed == nil {
		t.Fatal("the operator's chart is left to Helm's engine")
	}
	cases := []map[string]any{small, fullValues(t)}
	want := make([]map[string]string, len(cases))
	for i, vals := range cases {
		var err error
		if want[i], err = (engine.Engine{}).Render(ch, helmRenderValues(t, ch, vals)); err != nil {
			t.Fatal(err)
		}
	}
	const goroutines, renders = 8, 20
	inputs := make([][]chartutil.Values, goroutines)
	for g := range inputs {
		for range renders {
			inputs[g] = append(inputs[g], helmRenderValues(t, ch, cases[g%len(cases)]))
		}
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for _, vals := range inputs[g] {
				i := g % len(cases)
				got, ok := parsed.render(ch, vals)
				if !ok || !maps.Equal(got, want[i]) {
					t.Errorf("goroutine %d rendered other text than Helm's engine", g)
					return
				}
			}
		})
	}
	wg.Wait()
}

// A chart whose templates this path cannot render as Helm's engine does is
// rendered by Helm's engine, and so is a render that fails, whose error is
// then Helm's.
func TestTemplatesParsedOnceLeaveTheRestToHelm(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"tpl":      {"a.yaml": `{{ tpl "x: {{ .Values.x }}" . }}`},
		"required": {"a.yaml": `{{ required "x is required" .Values.x }}`},
		"Files":    {"a.yaml": `{{ .Files.Get "f" }}`},
		"toJson":   {"a.yaml": `{{ toJson .Values }}`},
		"fail":     {"a.yaml": `{{ fail "no" }}`},
	} {
		t.Run(name, func(t *testing.T) {
			if parseTemplates(chartOf(files)) != nil {
				t.Errorf("parsed once: %v", files)
			}
		})
	}

	ch := chartOf(map[string]string{"a.yaml": `{{ include "nowhere" . }}`})
	parsed := parseTemplates(ch)
	if parsed == nil {
		t.Fatal("a chart of sprig's functions and include is left to Helm's engine")
	}
	vals := helmRenderValues(t, ch, map[string]any{})
	if _, ok := parsed.render(ch, vals); ok {
		t.Error("a template that includes what is not defined rendered")
	}
	var m Manager
	if _, ok := m.renderTemplates(ch, vals); ok {
		t.Error("renderTemplates rendered what Helm's engine fails on")
	}
	loop := chartOf(map[string]string{"_h.tpl": `{{ define "loop" }}{{ include "loop" . }}{{ end }}`, "a.yaml": `{{ include "loop" . }}`})
	if _, ok := parseTemplates(loop).render(loop, helmRenderValues(t, loop, map[string]any{})); ok {
		t.Error("a template that includes itself rendered")
	}
}

// Two files that define the same name: the define parsed last wins, in
// Helm's order of parsing, and a missing key prints as nothing.
func TestTemplatesParsedOnceInHelmsOrder(t *testing.T) {
	ch := chartOf(map[string]string{
		"_a.tpl":        `{{ define "who" }}a{{ end }}`,
		"_b.tpl":        `{{ define "who" }}b{{ end }}`,
		"sub/_c.tpl":    `{{ define "who" }}c{{ end }}`,
		"out.yaml":      `who: {{ include "who" . }} missing: {{ .Values.missing }}{{ index .Values "none" }} template: {{ .Template.Name }} {{ .Template.BasePath }} chart: {{ .Chart.Name }} {{ .Chart.IsRoot }} release: {{ .Release.Name }} {{ toYaml .Values.list | nindent 2 }}`,
		"sub/more.yaml": `{{ include "who" . | quote }}`,
	})
	vals := helmRenderValues(t, ch, map[string]any{"list": []any{"x", map[string]any{"y": 1}}})
	want, err := engine.Engine{}.Render(ch, vals)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := parseTemplates(ch).render(ch, vals)
	if !ok || !maps.Equal(got, want) {
		t.Errorf("rendered %v (%v), Helm's %v", got, ok, want)
	}
}

// chartOf is a chart of the given templates, named as under templates/.
func chartOf(files map[string]string) *chart.Chart {
	ch := &chart.Chart{Metadata: &chart.Metadata{Name: "c", Version: "0.1.0", APIVersion: chart.APIVersionV2}}
	for name, text := range files {
		ch.Templates = append(ch.Templates, &chart.File{Name: "templates/" + name, Data: []byte(text)})
	}
	return ch
}
