package release

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestHelmsRefusalToAdoptIsAConflictNamingTheObject(t *testing.T) {
	helmErr := errors.New(`rendered manifests contain a resource that already exists. Unable to continue with install: ` +
		`ConfigMap "resnet-config" in namespace "ml" exists and cannot be imported into the current release: ` +
		`invalid ownership metadata; label validation error: missing key "app.kubernetes.io/managed-by": must be set to "Helm"`)
	err := classify("resnet", fmt.Errorf("install release ml/resnet: %w", helmErr))
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("%v is not ErrConflict", err)
	}
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Kind != "ConfigMap" || ce.Name != "resnet-config" || ce.Namespace != "ml" {
		t.Fatalf("got %#v", err)
	}
	for _, want := range []string{`ConfigMap "resnet-config" in namespace ml`, "not created by ModelServer resnet", "will not adopt", "delete or rename"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	if !errors.Is(err, helmErr) {
		t.Error("Helm's error is not kept")
	}
}

func TestOtherHelmErrorsAreNotConflicts(t *testing.T) {
	err := classify("resnet", errors.New(`upgrade release ml/resnet: Deployment.apps "resnet" is invalid: spec.replicas: Invalid value`))
	if errors.Is(err, ErrConflict) {
		t.Errorf("%v classified as a conflict", err)
	}
}
