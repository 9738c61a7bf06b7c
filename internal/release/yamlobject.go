package release

import (
	"unicode/utf8"

	yamlv2 "go.yaml.in/yaml/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// decodeDoc decodes one YAML document as Helm's Build does, into an object;
// nil for a document of nothing but comments. ok is false where Build's
// decoder fails.
//
// Build converts the YAML to JSON (sigs.k8s.io/yaml) and decodes the JSON:
// the tree YAML's parser makes is encoded and decoded once more, a third
// of what an install allocated. yamlObject converts that tree directly
// where the JSON in between cannot change it; anything else takes Build's
// road.
func decodeDoc(y []byte) (_ *unstructured.Unstructured, ok bool) {
	if m, null, direct := yamlObject(y); direct {
		if null {
			return nil, true
		}
		obj := &unstructured.Unstructured{Object: m}
		if obj.GetKind() == "" {
			return nil, false // the JSON decoder refuses an object without a kind
		}
		return obj, true
	}
	return decodeThroughJSON(y)
}

// decodeThroughJSON is Build's road: the YAML to JSON, the JSON decoded.
func decodeThroughJSON(y []byte) (_ *unstructured.Unstructured, ok bool) {
	js, err := yaml.YAMLToJSON(y)
	if err != nil {
		return nil, false
	}
	if string(js) == "null" {
		return nil, true
	}
	decoded, err := runtime.Decode(unstructured.UnstructuredJSONScheme, js)
	if err != nil {
		return nil, false
	}
	obj, isObject := decoded.(*unstructured.Unstructured)
	return obj, isObject
}

// yamlObject is the object sigs.k8s.io/yaml's YAMLToJSON and the
// unstructured JSON decoder make of a YAML document, made from the YAML
// parser's tree without the JSON. It parses with the same parser and the
// same options as YAMLToJSON. direct is false for whatever that JSON could
// change, or decode to something other than an object:
//   - a key that is not a string (YAMLToJSON formats it);
//   - a float (a whole one comes back from the JSON as an integer), an
//     integer beyond int64's range, or any other type the parser gives;
//   - a string that is not UTF-8 (the JSON encoder replaces the bytes);
//   - a document whose top is not a mapping, or has "items" (a List).
func yamlObject(y []byte) (obj map[string]any, null, direct bool) {
	var doc any
	if err := yamlv2.Unmarshal(y, &doc); err != nil {
		return nil, false, false
	}
	if doc == nil {
		return nil, true, true
	}
	top, isMap := doc.(map[any]any)
	if !isMap {
		return nil, false, false
	}
	if _, list := top["items"]; list {
		return nil, false, false
	}
	v, direct := jsonValue(top)
	if !direct {
		return nil, false, false
	}
	return v.(map[string]any), false, true
}

// jsonValue is v as the JSON decoder would give it back; ok is false for
// what the JSON could change (yamlObject).
func jsonValue(v any) (_ any, ok bool) {
	switch v := v.(type) {
	case nil, bool, int64:
		return v, true
	case int:
		return int64(v), true
	case string:
		return v, utf8.ValidString(v)
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			key, isString := k.(string)
			if !isString || !utf8.ValidString(key) {
				return nil, false
			}
			if m[key], ok = jsonValue(e); !ok {
				return nil, false
			}
		}
		return m, true
	case []any:
		s := make([]any, len(v))
		for i, e := range v {
			if s[i], ok = jsonValue(e); !ok {
				return nil, false
			}
		}
		return s, true
	}
	return nil, false
}
