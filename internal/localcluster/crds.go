package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/yaml"
)

// InstallCRDs creates the CRDs of the YAML files in dir, as `make install`
// would, and waits until each is established: served, so that the next
// request for its kind does not fail.
func (c *Cluster) InstallCRDs(ctx context.Context, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRDs in %s: %v", dir, err)
	}
	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(files))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, crd); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		crds = append(crds, crd)
	}
	return c.CreateCRDs(ctx, 30*time.Second, crds...)
}

// CreateCRDs creates crds and waits up to timeout until each is
// established.
func (c *Cluster) CreateCRDs(ctx context.Context, timeout time.Duration, crds ...*apiextensionsv1.CustomResourceDefinition) error {
	cs, err := apiextensionsclient.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(crds))
	for _, crd := range crds {
		if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create CRD %s: %w", crd.Name, err)
		}
		names = append(names, crd.Name)
	}
	return c.WaitForCRDs(ctx, timeout, names...)
}

// WaitForCRDs polls until each named CRD, or with no names every CRD in the
// cluster, is Established and in the apiserver's discovery. It polls the
// condition rather than run kubectl wait, which fails at once, instead of
// waiting, on a CRD created a moment before: its status has no conditions
// yet. Established is not enough for a client that maps kinds through
// discovery (kubectl, controller-runtime's client): the apiserver adds the
// CRD's group to discovery a moment later, and under load a create sent
// in between failed with "no matches for serving.modelserver.dev/v1alpha1".
func (c *Cluster) WaitForCRDs(ctx context.Context, timeout time.Duration, names ...string) error {
	cs, err := apiextensionsclient.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		return err
	}
	var pending []string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := cs.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		if pending = notEstablished(list.Items, names); len(pending) > 0 {
			return false, nil
		}
		if len(names) == 0 && len(list.Items) == 0 {
			return false, nil
		}
		// A group discovery cannot list comes back as an error beside
		// the resources of the others: what it lists is what counts.
		_, served, _ := dc.ServerGroupsAndResources()
		pending = notDiscovered(list.Items, names, served)
		return len(pending) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("CRDs not Established and discovered after %s: %v: %w", timeout, pending, err)
	}
	return nil
}

// notDiscovered returns the names among want (all of crds when want is
// empty) that are missing from crds or have a served version whose
// resource discovery does not list.
func notDiscovered(crds []apiextensionsv1.CustomResourceDefinition, want []string, served []*metav1.APIResourceList) []string {
	listed := map[string]bool{}
	for _, l := range served {
		if l == nil {
			continue
		}
		for _, r := range l.APIResources {
			listed[l.GroupVersion+"/"+r.Name] = true
		}
	}
	return pendingCRDs(crds, want, func(crd *apiextensionsv1.CustomResourceDefinition) bool {
		for _, v := range crd.Spec.Versions {
			if v.Served && !listed[crd.Spec.Group+"/"+v.Name+"/"+crd.Spec.Names.Plural] {
				return false
			}
		}
		return true
	})
}

// notEstablished returns the names among want (all of crds when want is
// empty) that are missing from crds or not yet Established.
func notEstablished(crds []apiextensionsv1.CustomResourceDefinition, want []string) []string {
	return pendingCRDs(crds, want, func(crd *apiextensionsv1.CustomResourceDefinition) bool {
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true
			}
		}
		return false
	})
}

// pendingCRDs returns, sorted, the names among want (all of crds when want
// is empty) that are missing from crds or whose CRD is not yet ready.
func pendingCRDs(crds []apiextensionsv1.CustomResourceDefinition, want []string, ready func(*apiextensionsv1.CustomResourceDefinition) bool) []string {
	isReady := map[string]bool{}
	for i := range crds {
		isReady[crds[i].Name] = ready(&crds[i])
	}
	if len(want) == 0 {
		for name := range isReady {
			want = append(want, name)
		}
	}
	var pending []string
	for _, name := range want {
		if !isReady[name] {
			pending = append(pending, name)
		}
	}
	sort.Strings(pending)
	return pending
}
