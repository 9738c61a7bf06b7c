package main

import (
	"net/http/httptest"
	"testing"
	"time"
)

// Both operators are compared by these names; a request put under the
// wrong verb or resource would make the comparison say nothing.
func TestRequestsAreNamedByVerbAndResource(t *testing.T) {
	for _, c := range []struct{ method, url, want string }{
		{"GET", "/apis/serving.modelserver.dev/v1alpha1/namespaces/bench/modelservers?watch=true&resourceVersion=5", "watch modelservers"},
		{"GET", "/apis/serving.modelserver.dev/v1alpha1/modelservers?limit=500", "list modelservers"},
		{"PATCH", "/apis/serving.modelserver.dev/v1alpha1/namespaces/bench/modelservers/a/status", "patch modelservers/status"},
		{"PUT", "/apis/serving.modelserver.dev/v1alpha1/namespaces/bench/modelservers/a", "update modelservers"},
		{"GET", "/api/v1/namespaces/bench/secrets?labelSelector=owner%3Dhelm", "list secrets"},
		{"GET", "/api/v1/namespaces/bench/secrets/sh.helm.release.v1.a.v1", "get secrets"},
		{"POST", "/apis/apps/v1/namespaces/bench/deployments", "create deployments"},
		{"DELETE", "/api/v1/namespaces/bench/pods/p", "delete pods"},
		{"DELETE", "/api/v1/namespaces/bench/pods", "deletecollection pods"},
		{"GET", "/api/v1/namespaces/bench", "get namespaces"},
		{"GET", "/api/v1/namespaces", "list namespaces"},
		{"GET", "/api/v1/nodes/n1", "get nodes"},
		{"GET", "/apis/apps/v1", "get discovery"},
		{"GET", "/version", "get discovery"},
	} {
		if got := requestKind(httptest.NewRequest(c.method, c.url, nil)); got != c.want {
			t.Errorf("%s %s: got %q, want %q", c.method, c.url, got, c.want)
		}
	}
}

func TestOnlyChangesCountAsWrites(t *testing.T) {
	c := counts{"get secrets": 5, "watch modelservers": 1, "create deployments": 2, "patch modelservers/status": 3, "delete pods": 1, "update secrets": 4}
	if got := c.Writes(); got != 10 {
		t.Errorf("writes: got %d, want 10", got)
	}
	if got := c.Sub(counts{"get secrets": 5, "create deployments": 1}); got.Total() != 10 || got["get secrets"] != 0 {
		t.Errorf("sub: got %v", got)
	}
}

func TestPercentilesUseTheNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Second)
	}
	d := distributionOf(ds)
	if d.P50 != 50 || d.P90 != 90 || d.P99 != 99 || d.Max != 100 || d.Count != 100 {
		t.Errorf("got %+v", d)
	}
}
