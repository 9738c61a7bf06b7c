package localcluster

import (
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A CRD is discovered once discovery lists its resource in every version
// it serves; a version it does not serve need not be listed, and CRDs not
// waited for are not named.
func TestNotDiscoveredNamesCRDsWhoseServedVersionsDiscoveryLacks(t *testing.T) {
	crd := func(name, group, plural string, versions ...apiextensionsv1.CustomResourceDefinitionVersion) apiextensionsv1.CustomResourceDefinition {
		c := apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}
		c.Spec.Group, c.Spec.Names.Plural, c.Spec.Versions = group, plural, versions
		return c
	}
	served := func(name string) apiextensionsv1.CustomResourceDefinitionVersion {
		return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: true}
	}
	crds := []apiextensionsv1.CustomResourceDefinition{
		crd("widgets.a.test", "a.test", "widgets", served("v1"), served("v2"), apiextensionsv1.CustomResourceDefinitionVersion{Name: "v0"}),
		crd("gadgets.b.test", "b.test", "gadgets", served("v1")),
	}
	list := func(gv string, resources ...string) *metav1.APIResourceList {
		l := &metav1.APIResourceList{GroupVersion: gv}
		for _, r := range resources {
			l.APIResources = append(l.APIResources, metav1.APIResource{Name: r})
		}
		return l
	}
	for _, tc := range []struct {
		name   string
		want   []string
		served []*metav1.APIResourceList
		got    []string
	}{
		{"nothing listed yet", nil, nil, []string{"gadgets.b.test", "widgets.a.test"}},
		{"one served version listed of two", nil, []*metav1.APIResourceList{list("a.test/v1", "widgets"), list("b.test/v1", "gadgets")}, []string{"widgets.a.test"}},
		{"every served version listed", nil, []*metav1.APIResourceList{list("a.test/v1", "widgets"), list("a.test/v2", "widgets", "widgets/status"), list("b.test/v1", "gadgets")}, nil},
		{"another resource of the group", nil, []*metav1.APIResourceList{list("a.test/v1", "widgets"), list("a.test/v2", "widgets"), list("b.test/v1", "sprockets"), nil}, []string{"gadgets.b.test"}},
		{"only the CRD waited for", []string{"widgets.a.test"}, []*metav1.APIResourceList{list("a.test/v1", "widgets"), list("a.test/v2", "widgets")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := notDiscovered(crds, tc.want, tc.served); !slices.Equal(got, tc.got) {
				t.Errorf("notDiscovered = %v, want %v", got, tc.got)
			}
		})
	}
}
