package main

import (
	"strings"
	"testing"
)

func TestParseMetricsPicksTheUnlabelledSamples(t *testing.T) {
	text := `# HELP etcd_mvcc_db_total_size_in_use_in_bytes Total size of the underlying database logically in use in bytes.
# TYPE etcd_mvcc_db_total_size_in_use_in_bytes gauge
etcd_mvcc_db_total_size_in_use_in_bytes 1.2345678e+07
etcd_mvcc_db_total_size_in_bytes 2.5e+07
etcd_debugging_mvcc_keys_total 5012
etcd_debugging_mvcc_keys_total_other 1
etcd_server_proposals_committed_total{x="y"} 9
`
	got, err := parseMetrics([]byte(text), metricKeys, metricInUse, metricFile)
	if err != nil {
		t.Fatal(err)
	}
	if got[metricInUse] != 12345678 || got[metricFile] != 25e6 || got[metricKeys] != 5012 || len(got) != 3 {
		t.Errorf("parsed %v", got)
	}
	_, err = parseMetrics([]byte(text), metricRevision)
	if err == nil || !strings.Contains(err.Error(), metricRevision) {
		t.Errorf("a missing metric: %v, want an error naming it", err)
	}
}

func TestResourceOfNamesCoreAndGroupResources(t *testing.T) {
	for key, want := range map[string]string{
		"pods/bench/ms-1-abc":                            "pods",
		"deployments/bench/ms-1":                         "deployments",
		"serving.modelserver.dev/modelservers/bench/m-1": "modelservers.serving.modelserver.dev",
		"apiextensions.k8s.io/customresourcedefinitions/modelservers.serving.modelserver.dev": "customresourcedefinitions.apiextensions.k8s.io",
		"ranges/serviceips": "ranges",
	} {
		if got := resourceOf(key); got != want {
			t.Errorf("resourceOf(%q) = %q, want %q", key, got, want)
		}
	}
}
