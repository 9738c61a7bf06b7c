package localcluster_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// A CRD installed is served when InstallCRDs returns, and a wait for a CRD
// that never comes names it instead of passing.
func TestInstalledCRDsAreEstablishedAndAMissingOneIsNamed(t *testing.T) {
	sharedCluster(t)
	c := shared.cluster
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "widgets.yaml"), []byte(widgetCRD), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.InstallCRDs(ctx, dir); err != nil {
		t.Fatal(err)
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
