package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

func TestForEachCallsEveryIndexOnce(t *testing.T) {
	const n = 1000
	var calls [n]atomic.Int32
	if err := forEach(context.Background(), n, 16, func(_ context.Context, i int) error {
		calls[i].Add(1)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := range calls {
		if got := calls[i].Load(); got != 1 {
			t.Fatalf("index %d called %d times", i, got)
		}
	}
}

func TestForEachStopsAtTheFirstError(t *testing.T) {
	broken := errors.New("broken")
	var calls atomic.Int32
	err := forEach(context.Background(), 10_000, 4, func(_ context.Context, i int) error {
		calls.Add(1)
		if i == 10 {
			return broken
		}
		return nil
	})
	if !errors.Is(err, broken) {
		t.Fatalf("got %v, want the error of index 10", err)
	}
	if calls.Load() == 10_000 {
		t.Error("every index was called after one failed")
	}
}

// The ModelServer CRD's rules sit at every depth: on the root, on nested
// objects, on list items and on map values.
func TestWithoutCELRulesLeavesNoneInTheModelServerCRD(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "serving.modelserver.dev_modelservers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(b, crd); err != nil {
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
