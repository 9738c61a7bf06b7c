package release

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"

	"helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

func FuzzSplitManifestAsHelm(f *testing.F) {
	for _, seed := range []string{
		"", "---", "a", "---\na", "a\n---\nb", "a\n---", "a \n\n---\n b", "a\n ---\nb", "a ---b",
		"---\n---", "---\n\n---\nx", "a\n---b\n---\n\n---\nc", "\t\n---\t\n a: 1\n---\r\nb: 2\n",
		"a\f\n---\fb", "a\v\n---\vb", "x\n--- # y\nz", "a\n----\nb", "a\n\n--\n---",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		helm := releaseutil.SplitManifests(text)
		want := make([]string, len(helm))
		for i := range want {
			want[i] = helm[fmt.Sprintf("manifest-%d", i)]
		}
		if got := splitManifest(text); !slices.Equal(got, want) {
			t.Errorf("splitManifest(%q) = %q, Helm's %q", text, got, want)
		}
	})
}

// fullValues are the values of a ModelServer that renders every kind the
// chart has, with labels and annotations YAML would misread unquoted.
func fullValues(tb testing.TB) map[string]any {
	tb.Helper()
	ms := &servingv1alpha1.ModelServer{ObjectMeta: metav1.ObjectMeta{Name: "resnet", Namespace: "ns", UID: "u"}}
	ms.Spec.Models = []servingv1alpha1.ModelSpec{
		{Name: "resnet", StorageURI: "s3://models/resnet", CredentialsSecret: "s3"},
		{Name: "bert", StorageURI: "gs://models/bert"},
	}
	ms.Spec.Autoscaling = &servingv1alpha1.Autoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 5, TargetCPUUtilizationPercentage: ptr.To[int32](70)}
	ms.Spec.Monitoring = servingv1alpha1.Monitoring{Enabled: ptr.To(true), ServiceMonitor: &servingv1alpha1.ServiceMonitorSpec{Interval: "15s", Labels: map[string]string{"release": "prom"}}}
	ms.Spec.Ingress = &servingv1alpha1.IngressSpec{Host: "models.example.com", ClassName: "nginx", TLSSecretName: "tls", Annotations: map[string]string{"a": "on", "b": "1e3"}}
	ms.Spec.Gateway = &servingv1alpha1.GatewaySpec{ParentRefs: []servingv1alpha1.GatewayParentRef{{Name: "gw", Namespace: "infra"}}, Hostnames: []string{"m.example.com"}, GRPC: ptr.To(true)}
	ms.Spec.NetworkPolicy = &servingv1alpha1.NetworkPolicySpec{AllowedNamespaces: []string{"apps"}}
	ms.Spec.PodTemplate.Labels = map[string]string{"gpu": "true", "nothing": "null", "mode": "0755", "empty": ""}
	ms.Spec.PodTemplate.Annotations = map[string]string{"note": "line one\nline two: \"quoted\" # not a comment", "tilde": "~"}
	apis := map[string]bool{}
	for _, gvk := range []schema.GroupVersionKind{values.HTTPRouteKind, values.GRPCRouteKind, values.ServiceMonitorKind} {
		apis[values.APIKey(gvk)] = true
	}
	return valuesOf(tb, ms, apis)
}

// TestParsedOnceIsHelmsRender: the release and the objects made with one
// parse of the manifest are those Helm's install and Build make.
func TestParsedOnceIsHelmsRender(t *testing.T) {
	m := offlineManager(t)
	cfg, err := m.config("ns", nil)
	if err != nil {
		t.Fatal(err)
	}
	ch, small := chartValues(t)
	for name, vals := range map[string]map[string]any{"small": small, "every kind": fullValues(t)} {
		t.Run(name, func(t *testing.T) {
			rel, got, ok, err := m.renderParsedOnce(cfg, "ns", "m", ch, vals, "d")
			if err != nil || !ok {
				t.Fatalf("rendered: %v, %v", ok, err)
			}
			want, err := m.render(context.Background(), "ns", "m", ch, vals, "d")
			if err != nil {
				t.Fatal(err)
			}
			rel.Info.FirstDeployed, rel.Info.LastDeployed = want.Info.FirstDeployed, want.Info.LastDeployed
			if g, w := mustJSON(t, rel), mustJSON(t, want); g != w {
				t.Errorf("release:\n%s\nHelm's:\n%s", g, w)
			}
			if !maps.Equal(rel.Labels, want.Labels) { // not in the JSON: the record's labels
				t.Errorf("release labels %v, Helm's %v", rel.Labels, want.Labels)
			}
			wantObjs, err := cfg.KubeClient.Build(bytes.NewBufferString(want.Manifest), false)
			if err != nil {
				t.Fatal(err)
			}
			kinds := sameObjects(t, got, wantObjs)
			if name == "every kind" {
				for _, kind := range []string{"HorizontalPodAutoscaler", "Ingress", "NetworkPolicy", "PodDisruptionBudget", "ServiceMonitor", "HTTPRoute", "GRPCRoute", "Job"} {
					if !kinds[kind] {
						t.Errorf("no %s rendered: the case does not cover it", kind)
					}
				}
			}
		})
	}
}

// sameObjects compares the objects made with one parse with those of
// Helm's Build, and returns the kinds there are.
func sameObjects(t *testing.T, got, want kube.ResourceList) map[string]bool {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d objects, Helm's Build %d", len(got), len(want))
	}
	kinds := map[string]bool{}
	for i, w := range want {
		g := got[i]
		kinds[w.Mapping.GroupVersionKind.Kind] = true
		if g.Name != w.Name || g.Namespace != w.Namespace || g.ResourceVersion != w.ResourceVersion || g.Source != w.Source ||
			!reflect.DeepEqual(g.Mapping, w.Mapping) || !equality.Semantic.DeepEqual(g.Object, w.Object) {
			t.Errorf("object %d: %s %s/%s %v, Helm's %s %s/%s %v", i, g.Mapping.GroupVersionKind, g.Namespace, g.Name, g.Object,
				w.Mapping.GroupVersionKind, w.Namespace, w.Name, w.Object)
		}
		gc, wc := g.Client.(*rest.RESTClient), w.Client.(*rest.RESTClient)
		if gc.Get().URL().String() != wc.Get().URL().String() || gc.APIVersion() != wc.APIVersion() {
			t.Errorf("object %d: client for %s %s, Helm's %s %s", i, gc.Get().URL(), gc.APIVersion(), wc.Get().URL(), wc.APIVersion())
		}
	}
	return kinds
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
