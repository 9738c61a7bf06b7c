package localcluster_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
)

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.crds.localcluster.test
spec:
  group: crds.localcluster.test
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// widgetCRDDir is a directory holding widgetCRD, as InstallCRDs and
// Options.CRDDir read CRDs.
func widgetCRDDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "widgets.yaml"), []byte(widgetCRD), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A CRD installed is served, and in discovery, when InstallCRDs returns,
// and a wait for a CRD that never comes names it instead of passing.
func TestInstalledCRDsAreEstablishedAndDiscoveredAndAMissingOneIsNamed(t *testing.T) {
	sharedCluster(t)
	c := shared.cluster
	ctx := context.Background()
	dir := widgetCRDDir(t)
	if err := c.InstallCRDs(ctx, dir); err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	if l, err := dc.ServerResourcesForGroupVersion("crds.localcluster.test/v1"); err != nil || len(l.APIResources) == 0 || l.APIResources[0].Name != "widgets" {
		t.Errorf("discovery of crds.localcluster.test/v1 once InstallCRDs returned: %+v, %v", l, err)
	}
	cs, err := apiextensionsclient.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.ApiextensionsV1().CustomResourceDefinitions().Delete(context.Background(), "widgets.crds.localcluster.test", metav1.DeleteOptions{})
	})
	if err := c.WaitForCRDs(ctx, 5*time.Second); err != nil {
		t.Errorf("every CRD in the cluster: %v", err)
	}

	err = c.WaitForCRDs(ctx, time.Second, "widgets.crds.localcluster.test", "gadgets.crds.localcluster.test")
	if err == nil || !strings.Contains(err.Error(), "[gadgets.crds.localcluster.test]") {
		t.Errorf("waiting for a CRD that does not exist: got %v, want an error naming only gadgets.crds.localcluster.test", err)
	}
}

// The CRDs of Options.CRDDir are installed before kube-controller-manager
// starts, so the garbage collector knows their kinds from its first
// discovery: an object a custom resource owns goes soon after the
// resource, not at the collector's next discovery, 30 s after it started.
func TestTheGarbageCollectorKnowsTheKindsOfTheCRDsInstalledAtStart(t *testing.T) {
	dir := widgetCRDDir(t)
	c := localcluster.ForTest(t, localcluster.Options{CRDDir: dir, NodePools: []localcluster.NodePool{}})
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	widgets := dyn.Resource(schema.GroupVersionResource{Group: "crds.localcluster.test", Version: "v1", Resource: "widgets"}).Namespace("default")
	w, err := widgets.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "crds.localcluster.test/v1", "kind": "Widget", "metadata": map[string]any{"name": "owner"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owned := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owned", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "crds.localcluster.test/v1", Kind: "Widget", Name: w.GetName(), UID: w.GetUID(),
	}}}}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, owned, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := widgets.Delete(ctx, "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	const before = 15 * time.Second
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, before, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "owned", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Errorf("the ConfigMap a deleted Widget owned is still there after %s: the garbage collector did not know Widgets", before)
	}
}
