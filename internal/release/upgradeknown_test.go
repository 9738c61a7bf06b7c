package release

import (
	"encoding/json"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/kube"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// modelValues are the values of a ModelServer serving uri, fetched.
func modelValues(tb testing.TB, uri string) map[string]any {
	tb.Helper()
	ms := &servingv1alpha1.ModelServer{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns", UID: "u"}}
	ms.Spec.Model = &servingv1alpha1.ModelSpec{StorageURI: uri}
	ms.Spec.Replicas = ptr.To[int32](1)
	return valuesOf(tb, ms, nil)
}

// upgradeObjects renders revision 1 with from and the next with to, as
// upgradeKnown does: the next revision, and the objects of each.
func upgradeObjects(tb testing.TB, from, to map[string]any) (next *helmrelease.Release, original, target kube.ResourceList) {
	tb.Helper()
	m := offlineManager(tb)
	cfg, err := m.config("ns", nil)
	if err != nil {
		tb.Fatal(err)
	}
	ch, _ := chartValues(tb)
	first, _, ok, err := m.renderParsedOnce(cfg, "ns", "m", ch, from, "d1")
	if err != nil || !ok {
		tb.Fatalf("render revision 1: ok %v, %v", ok, err)
	}
	first.SetStatus(helmrelease.StatusDeployed, "Install complete")
	next, target, ok, err = m.renderRevisionParsedOnce(cfg, "ns", "m", ch, to, "d2", first)
	if err != nil || !ok {
		tb.Fatalf("render revision 2: ok %v, %v", ok, err)
	}
	original, ok = m.recordedObjects(first.Manifest, "ns")
	if !ok {
		tb.Fatal("the recorded manifest of revision 1 did not parse")
	}
	for _, list := range []kube.ResourceList{original, target} {
		if err := list.Visit(markOwnership("m", "ns")); err != nil {
			tb.Fatal(err)
		}
	}
	return next, original, target
}

// upgradeWrites plans the writes from revision 1, rendered with from, to
// the next, rendered with to.
func upgradeWrites(t *testing.T, from, to map[string]any) (*helmrelease.Release, kube.ResourceList, []objectWrite) {
	t.Helper()
	next, original, target := upgradeObjects(t, from, to)
	writes, ok := planWrites(original, target)
	if !ok {
		t.Fatal("no plan")
	}
	return next, original, writes
}

// BenchmarkPlanWritesOfAModelChange: the patches between two revisions'
// objects, the part of an upgrade beyond Helm's render that grows with
// the chart's objects, whether they changed or not.
func BenchmarkPlanWritesOfAModelChange(b *testing.B) {
	_, original, target := upgradeObjects(b, modelValues(b, "s3://models/a"), modelValues(b, "s3://models/b"))
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := planWrites(original, target); !ok {
			b.Fatal("no plan")
		}
	}
}

func describe(writes []objectWrite) string {
	var out []string
	for _, w := range writes {
		out = append(out, w.verb+" "+w.info.Mapping.GroupVersionKind.Kind)
	}
	return strings.Join(out, ", ")
}

// TestAnUpgradeWritesOnlyWhatTheRenderChanged: a new model URI changes the
// model config, the serving pods' template and the fetch Job's name, and
// nothing else; the same values change nothing at all.
func TestAnUpgradeWritesOnlyWhatTheRenderChanged(t *testing.T) {
	a, b := modelValues(t, "s3://models/a"), modelValues(t, "s3://models/b")
	if _, _, writes := upgradeWrites(t, a, a); len(writes) != 0 {
		t.Errorf("the same values: %s; want no write", describe(writes))
	}
	_, original, writes := upgradeWrites(t, a, b)
	if got, want := describe(writes), "patch ConfigMap, patch Deployment, create Job, delete Job"; got != want {
		t.Fatalf("a new model URI: %s\nwant %s", got, want)
	}
	// Each patch, applied to the object as the previous revision made
	// it, gives the object as the new revision renders it.
	for _, w := range writes {
		if w.verb != "patch" {
			continue
		}
		from := original.Get(w.info)
		fromJSON, err := json.Marshal(from.Object)
		if err != nil {
			t.Fatal(err)
		}
		typed, err := scheme.Scheme.New(w.info.Mapping.GroupVersionKind)
		if err != nil {
			t.Fatal(err)
		}
		patched, err := strategicpatch.StrategicMergePatch(fromJSON, w.patch, typed)
		if err != nil {
			t.Fatalf("apply the patch of %s: %v", w.info.ObjectName(), err)
		}
		// Both through JSON, whose numbers are all float64.
		wantJSON, err := json.Marshal(w.info.Object.(*unstructured.Unstructured).Object)
		if err != nil {
			t.Fatal(err)
		}
		var got, want map[string]any
		if err := json.Unmarshal(patched, &got); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(wantJSON, &want); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(got, want) {
			t.Errorf("%s patched is not the new render:\n got %v\nwant %v", w.info.ObjectName(), got, want)
		}
	}
}

// TestTheUpgradedRevisionIsHelms: its number, its first deployment and its
// labels follow from the previous revision, as in Helm's upgrade.
func TestTheUpgradedRevisionIsHelms(t *testing.T) {
	a, b := modelValues(t, "s3://models/a"), modelValues(t, "s3://models/b")
	next, _, _ := upgradeWrites(t, a, b)
	if next.Version != 2 || next.Info.Status != helmrelease.StatusPendingUpgrade {
		t.Errorf("revision %d, %s; want 2, pending-upgrade", next.Version, next.Info.Status)
	}
	if next.Labels[LabelValuesDigest] != "d2" {
		t.Errorf("labels %v, want the new values digest d2", next.Labels)
	}
	if got := upgradeLabels(map[string]string{"a": "1", "b": "2"}, map[string]string{"b": "3", "a": "null"}); len(got) != 1 || got["b"] != "3" {
		t.Errorf("upgradeLabels = %v, want b=3 alone", got)
	}
}
