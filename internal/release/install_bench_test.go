package release

import (
	"bytes"
	"context"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// offlineManager is a Manager whose REST mapper knows the kinds the chart
// renders and whose capabilities are set, so that everything an install
// does before its first request runs without a cluster.
func offlineManager(tb testing.TB) *Manager {
	tb.Helper()
	cfg := &rest.Config{Host: "http://127.0.0.1:1"}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	for _, gvk := range []schema.GroupVersionKind{
		{Version: "v1", Kind: "ConfigMap"},
		{Version: "v1", Kind: "Service"},
		{Version: "v1", Kind: "PersistentVolumeClaim"},
		{Group: "apps", Version: "v1", Kind: "Deployment"},
		{Group: "batch", Version: "v1", Kind: "Job"},
		{Group: "autoscaling", Version: "v2", Kind: "HorizontalPodAutoscaler"},
		{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"},
		{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"},
		{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"},
		values.HTTPRouteKind, values.GRPCRouteKind, values.ServiceMonitorKind,
	} {
		mapper.Add(gvk, meta.RESTScopeNamespace)
	}
	caps := *clientOnlyInstall().KubeVersion
	m := &Manager{restConfig: cfg, mapper: mapper, clientset: cs}
	m.caps = &chartutil.Capabilities{KubeVersion: caps, HelmVersion: chartutil.DefaultCapabilities.HelmVersion}
	return m
}

// BenchmarkFreshInstallClientSide times what a new ModelServer's install
// costs the operator before and between its requests: the render, the
// objects built from it, and the release record encoded. "helm" does it
// as Helm's install, Build and Secrets driver do; "operator" as the
// operator does (renderParsedOnce, newRecords).
func BenchmarkFreshInstallClientSide(b *testing.B) {
	m := offlineManager(b)
	ch, vals := chartValues(b)
	cfg, err := m.config("ns", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("helm", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rel, err := m.render(context.Background(), "ns", "m", ch, vals, "d")
			if err != nil {
				b.Fatal(err)
			}
			resources, err := cfg.KubeClient.Build(bytes.NewBufferString(rel.Manifest), false)
			if err != nil {
				b.Fatal(err)
			}
			if err := resources.Visit(markOwnership("m", "ns")); err != nil {
				b.Fatal(err)
			}
			encodeAsHelm(b, withoutTemplates(rel))
		}
	})
	b.Run("operator", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rel, resources, err := m.renderAndBuild(context.Background(), cfg, "ns", "m", ch, vals, "d")
			if err != nil {
				b.Fatal(err)
			}
			if err := resources.Visit(markOwnership("m", "ns")); err != nil {
				b.Fatal(err)
			}
			if _, err := encodeRecord(withoutTemplates(rel)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
