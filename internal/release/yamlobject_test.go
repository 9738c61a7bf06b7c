package release

import (
	"maps"
	"reflect"
	"strings"
	"testing"
)

// A document converted straight from YAML is the object Build's road
// through JSON makes of it, and what the JSON could change takes that road.
func TestYAMLObjectIsWhatTheJSONGivesBack(t *testing.T) {
	const head = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: m\n"
	for _, c := range []struct {
		name, doc string
		direct    bool
	}{
		{"nested maps, lists, scalars", head + "data:\n  a: x\nspec:\n  count: 3\n  neg: -7\n  hex: 0x1F\n  under: 1_000\n  enabled: on\n  disabled: false\n  nothing: ~\n  empty: {}\n  none: []\n  list: [1, \"2\", {k: v}, [true]]\n  text: |\n    two\n    lines\n", true},
		{"comments only", "# Source: x.yaml\n# nothing\n", true},
		{"a whole float", head + "spec:\n  replicas: 1.0\n", false},
		{"a float", head + "spec:\n  ratio: 1.5\n", false},
		{"an integer beyond int64", head + "spec:\n  big: 18446744073709551615\n", false},
		{"an integer key", head + "data:\n  1: one\n", false},
		{"a boolean key", head + "data:\n  true: yes\n", false},
		{"a key YAML 1.1 reads as a boolean", head + "data:\n  n: no\n", false},
		{"a timestamp, which the parser gives as a string", head + "spec:\n  at: !!timestamp 2001-12-14\n", true},
		{"binary, not UTF-8", head + "spec:\n  raw: !!binary /w==\n", false},
		{"a list at the top", "- a\n- b\n", false},
		{"a List", "apiVersion: v1\nkind: List\nitems: []\n", false},
		{"no kind", "apiVersion: v1\nmetadata:\n  name: m\n", true},
		{"not YAML", head + "data: [\n", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			y := []byte(c.doc)
			if _, _, direct := yamlObject(y); direct != c.direct {
				t.Errorf("converted directly: %v, want %v", direct, c.direct)
			}
			got, gotOK := decodeDoc(y)
			want, wantOK := decodeThroughJSON(y)
			if gotOK != wantOK || !reflect.DeepEqual(got, want) {
				t.Errorf("decoded %v (%v), through JSON %v (%v)", got, gotOK, want, wantOK)
			}
		})
	}
}

// Every document the operator's chart renders is converted directly.
func TestTheChartsDocumentsAreConvertedDirectly(t *testing.T) {
	ch, small := chartValues(t)
	parsed := parseTemplates(ch)
	for name, vals := range map[string]map[string]any{"small": small, "every kind": fullValues(t)} {
		files, ok := parsed.render(ch, helmRenderValues(t, ch, vals))
		if !ok {
			t.Fatal("the templates parsed once did not render")
		}
		maps.DeleteFunc(files, func(file, _ string) bool { return strings.HasSuffix(file, "NOTES.txt") })
		docs, ok := parseManifests(files)
		if !ok {
			t.Fatal("the rendered files did not parse")
		}
		objects := 0
		for _, d := range docs {
			y := []byte(d.text + "\n")
			m, null, direct := yamlObject(y)
			if !direct {
				t.Errorf("%s, %s: not converted directly:\n%s", name, d.file, d.text)
				continue
			}
			if null { // only comments
				continue
			}
			if want, _ := decodeThroughJSON(y); !reflect.DeepEqual(m, want.Object) {
				t.Errorf("%s, %s: %v, through JSON %v", name, d.file, m, want.Object)
			}
			objects++
		}
		if objects < 4 {
			t.Errorf("%s: %d objects", name, objects)
		}
	}
}
