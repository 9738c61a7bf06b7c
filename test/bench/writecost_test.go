package main

import (
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The ModelServer CRD's rules sit at every depth: on the root, on nested
// objects, on list items and on map values.
func TestWithoutCELRulesLeavesNoneInTheModelServerCRD(t *testing.T) {
	crd, err := readCRD(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	count := func() int {
		out, err := yaml.Marshal(crd)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(out), "x-kubernetes-validations")
	}
	if count() == 0 {
		t.Fatal("the CRD has no CEL rules to remove")
	}
	for i := range crd.Spec.Versions {
		withoutCELRules(crd.Spec.Versions[i].Schema.OpenAPIV3Schema)
	}
	if n := count(); n != 0 {
		t.Errorf("%d CEL rule lists left", n)
	}
}
