//go:build tools

// Package crds names the API controller-gen reads, so that go mod tidy
// keeps it.
package crds

import _ "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
