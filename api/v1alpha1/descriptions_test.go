package v1alpha1_test

import (
	"os"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// `kubectl explain` shows a field's description and nothing else about
// what it means, so a field without one leaves the user guessing. The CRD
// is generated from the Go types' comments: a missing description is a
// missing comment in modelserver_types.go.
func TestEveryCRDFieldExplainsItself(t *testing.T) {
	raw, err := os.ReadFile("../../config/crd/bases/serving.modelserver.dev_modelservers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(raw, crd); err != nil {
		t.Fatal(err)
	}
	missing := undescribed("modelserver", *crd.Spec.Versions[0].Schema.OpenAPIV3Schema)
	// The root and metadata are explained by Kubernetes itself.
	missing = slices.DeleteFunc(missing, func(p string) bool { return p == "modelserver" || p == "modelserver.metadata" })
	for _, p := range missing {
		t.Errorf("%s has no description: add a comment to its field in api/v1alpha1, then make manifests", p)
	}
	if n := countFields(*crd.Spec.Versions[0].Schema.OpenAPIV3Schema); n < 50 {
		t.Fatalf("only %d fields walked: the schema walk is broken", n)
	}
}

// undescribed lists the paths, in `kubectl explain` notation, of fields
// without a description.
func undescribed(path string, s apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	if s.Description == "" {
		out = append(out, path)
	}
	for _, name := range sortedKeys(s.Properties) {
		out = append(out, undescribed(path+"."+name, s.Properties[name])...)
	}
	if s.Items != nil && s.Items.Schema != nil {
		// An array's items are explained by the array's own description.
		items := *s.Items.Schema
		items.Description = "items"
		out = append(out, undescribed(path, items)...)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		values := *s.AdditionalProperties.Schema
		values.Description = "values"
		out = append(out, undescribed(path, values)...)
	}
	return out
}

func countFields(s apiextensionsv1.JSONSchemaProps) int {
	n := len(s.Properties)
	for _, p := range s.Properties {
		n += countFields(p)
	}
	if s.Items != nil && s.Items.Schema != nil {
		n += countFields(*s.Items.Schema)
	}
	return n
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
