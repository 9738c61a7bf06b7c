package main

import (
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Both operators are compared by these names and counts; a request put
// under the wrong verb or resource, counted twice or not at all would make
// the comparison say nothing.
func TestRequestsAreCountedOnceByVerbAndResource(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	l, err := openRequestLog(path, operatorUser)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	write := func(s string) {
		t.Helper()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	event := func(id, stage, verb, user, objectRef string) string {
		ref := ""
		if objectRef != "" {
			ref = `,"objectRef":` + objectRef
		}
		return `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"` + id +
			`","stage":"` + stage + `","verb":"` + verb + `","user":{"username":"` + user +
			`","groups":["system:masters","system:authenticated"]}` + ref + `,"responseStatus":{"metadata":{},"code":200}}` + "\n"
	}
	// A watch, counted once it streams and not again when it ends.
	write(event("w1", "ResponseStarted", "watch", operatorUser, `{"resource":"modelservers","namespace":"bench","apiGroup":"serving.modelserver.dev","apiVersion":"v1alpha1"}`))
	write(event("p1", "ResponseComplete", "patch", operatorUser, `{"resource":"modelservers","namespace":"bench","name":"a","apiGroup":"serving.modelserver.dev","apiVersion":"v1alpha1","subresource":"status"}`))
	write(event("d1", "ResponseComplete", "get", operatorUser, ""))
	write(event("x1", "ResponseComplete", "create", "admin", `{"resource":"configmaps","namespace":"bench"}`))
	// A line the apiserver has not finished writing is not counted yet.
	line := event("c1", "ResponseComplete", "create", operatorUser, `{"resource":"secrets","namespace":"bench","apiVersion":"v1"}`)
	write(line[:40])
	want := counts{"watch modelservers": 1, "patch modelservers/status": 1, "get discovery": 1}
	if got := l.Snapshot(); !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	write(line[40:])
	write(event("w1", "ResponseComplete", "watch", operatorUser, `{"resource":"modelservers","namespace":"bench"}`))
	write(event("l1", "ResponseComplete", "list", operatorUser, `{"resource":"pods"}`))
	want = counts{"watch modelservers": 1, "patch modelservers/status": 1, "get discovery": 1, "create secrets": 1, "list pods": 1}
	if got := l.Snapshot(); !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	write("{not json\n")
	if got := l.Snapshot()["unreadable audit line"]; got != 1 {
		t.Errorf("an unreadable line: counted %d times, want 1", got)
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
