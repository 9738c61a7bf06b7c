package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestTheFetcherLinksNoneOfTheOperator: the fetcher exists so that a fetch
// pod starts without initialising the operator's dependencies, nor Google's
// storage library (gRPC, xDS and OpenTelemetry came with it); a package
// that pulls one of them in would undo that without failing anything else.
func TestTheFetcherLinksNoneOfTheOperator(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed %d packages: %q", len(deps), deps)
	}
	for _, dep := range deps {
		for _, heavy := range []string{
			"sigs.k8s.io/controller-runtime",
			"helm.sh/helm",
			"k8s.io/client-go",
			"github.com/santhosh-tekuri/jsonschema",
			"github.com/prometheus/client_golang",
			"github.com/modelserver-dev/modelserver-operator/controllers",
			"github.com/modelserver-dev/modelserver-operator/internal/release",
			"cloud.google.com/go/storage",
			"github.com/envoyproxy/go-control-plane",
		} {
			if strings.HasPrefix(dep, heavy) {
				t.Errorf("the fetcher links %s", dep)
			}
		}
	}
}
