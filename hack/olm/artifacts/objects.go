// Package artifacts makes the operator's install artifacts from config/: the
// OLM bundle (bundle/, bundle.Dockerfile), the file-based catalog (catalog/)
// and the plain install file (dist/install.yaml). Every function is pure and
// deterministic: the same inputs give the same bytes, so that regenerating
// the committed files tells whether they drifted.
package artifacts

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// decodeObjects reads a stream of YAML documents, such as the output of
// `kustomize build`, keeping their order and skipping empty documents.
func decodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read document %d: %w", i, err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("parse document %d: %w", i, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetAPIVersion() == "" {
			return nil, fmt.Errorf("document %d has no apiVersion or kind", i)
		}
		objs = append(objs, u)
	}
}

// encodeObjects writes objects as a stream of YAML documents.
func encodeObjects(objs []*unstructured.Unstructured) ([]byte, error) {
	var buf bytes.Buffer
	for _, o := range objs {
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			return nil, fmt.Errorf("marshal %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		buf.WriteString("---\n")
		buf.Write(b)
	}
	return buf.Bytes(), nil
}

// toTyped converts an object read from YAML into its Go type, refusing
// fields the type does not have.
func toTyped(u *unstructured.Unstructured, into any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, into, true); err != nil {
		return fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// find returns the objects of one kind.
func find(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}
