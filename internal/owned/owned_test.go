package owned

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// The chart can only render, and the operator only watch and drift-check,
// the kinds the operator's ServiceAccount may manage; the RBAC markers are
// where that is granted.
func TestEveryOwnedKindHasItsRBACMarker(t *testing.T) {
	src, err := os.ReadFile("../../controllers/modelserver_controller.go")
	if err != nil {
		t.Fatal(err)
	}
	marker := regexp.MustCompile(`(?m)^// \+kubebuilder:rbac:groups=([^,]*),resources=([^,]+),verbs=(\S+)$`)
	granted := map[string][]string{} // group/resource → verbs
	for _, m := range marker.FindAllStringSubmatch(string(src), -1) {
		group := strings.Trim(m[1], `"`)
		for _, res := range strings.Split(m[2], ";") {
			granted[group+"/"+res] = append(granted[group+"/"+res], strings.Split(m[3], ";")...)
		}
	}
	if len(granted) == 0 {
		t.Fatal("no RBAC markers found")
	}
	for _, k := range Kinds {
		verbs := granted[k.Group+"/"+k.Resource]
		for _, v := range []string{"get", "list", "watch", "create", "update", "patch", "delete"} {
			if !slices.Contains(verbs, v) {
				t.Errorf("%s: no +kubebuilder:rbac marker grants %q on %s in group %q", k.Name, v, k.Resource, k.Group)
			}
		}
	}
}

func TestRenderedListsWhatTheValuesRender(t *testing.T) {
	v := &values.Values{
		Names:   values.Names{Deployment: "m", Service: "m", ConfigMap: "m-config"},
		Fetches: []values.Fetch{{Name: "m-fetch-b"}, {Name: "m-fetch-a"}},
		Volume:  values.Volume{Create: true, ClaimName: "m-model"},
	}
	var got []string
	for _, k := range Rendered(v) {
		got = append(got, k.String())
	}
	want := []string{"ConfigMap m-config", "Deployment m", "Job m-fetch-a", "Job m-fetch-b", "PersistentVolumeClaim m-model", "Service m"}
	if !slices.Equal(got, want) {
		t.Errorf("Rendered = %q, want %q", got, want)
	}
}
