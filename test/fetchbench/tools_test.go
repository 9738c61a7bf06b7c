package main

import (
	"path/filepath"
	"testing"
)

func TestModuleVersion(t *testing.T) {
	p := filepath.Join(t.TempDir(), "go.mod")
	write(t, p, "module x\n\ngo 1.26.0\n\nrequire example.com/one v1.2.3\n\nrequire (\n\texample.com/two v0.4.0 // indirect\n\texample.com/two/v2 v2.0.1\n)\n")
	for module, want := range map[string]string{
		"example.com/one":    "v1.2.3",
		"example.com/two":    "v0.4.0",
		"example.com/two/v2": "v2.0.1",
		"example.com/three":  "unknown",
	} {
		if got := moduleVersion(p, module); got != want {
			t.Errorf("moduleVersion(%s) = %s, want %s", module, got, want)
		}
	}
}
