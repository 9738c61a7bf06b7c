package olmv1

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"os"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/modelserver-dev/modelserver-operator/test/bundle"
)

// generatedRoleNames are the names OLM v1 (operator-controller v1.2.0)
// gives the ClusterRoles and ClusterRoleBindings it makes for the CSV's
// clusterPermissions and, in AllNamespaces mode, its permissions:
// "<CSV name>-<account>", cut to fit, a dash, and the base-36 SHA-224 of
// the permission's JSON. Computed here so that a change of the operator's
// RBAC fails in seconds with the names to add, not after an OLM v1 install
// refused as forbidden.
func generatedRoleNames(t *testing.T) []string {
	t.Helper()
	csv, err := bundle.ReadCSV("../..")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range append(csv.Permissions, csv.ClusterPermissions...) {
		h := sha256.New224()
		if err := json.NewEncoder(h).Encode(p); err != nil {
			t.Fatal(err)
		}
		hash := new(big.Int).SetBytes(h.Sum(nil)).Text(36)
		base := csv.Name + "-" + p.ServiceAccountName
		if len(base)+len(hash) > 63 {
			base = base[:63-len(hash)-1]
		}
		names = append(names, base+"-"+hash)
	}
	return names
}

// The installer's RBAC names every ClusterRole and binding OLM v1 makes
// from this bundle, and docs/olm.md gives users that RBAC word for word.
func TestTheInstallerMayManageTheRolesOLMGeneratesFromTheBundle(t *testing.T) {
	names := generatedRoleNames(t)
	if len(names) != 2 {
		t.Fatalf("OLM v1 makes a ClusterRole for each of the CSV's clusterPermissions and permissions; expected 2, found %v", names)
	}
	byResource := map[string][]string{}
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(installerRBAC), 4096)
	for {
		var role rbacv1.ClusterRole
		err := dec.Decode(&role)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if role.Kind != "ClusterRole" || role.Name != installerSA {
			continue
		}
		for _, r := range role.Rules {
			if !slices.Contains(r.Verbs, "patch") || len(r.ResourceNames) == 0 {
				continue
			}
			for _, res := range r.Resources {
				byResource[res] = append(byResource[res], r.ResourceNames...)
			}
		}
	}
	for _, res := range []string{"clusterroles", "clusterrolebindings"} {
		for _, name := range names {
			if !slices.Contains(byResource[res], name) {
				t.Errorf("the installer may not get or patch the %s %s that OLM v1 makes from the bundle's CSV: add the name to installerRBAC and docs/olm.md, keeping the old ones for OLM to delete", res, name)
			}
		}
	}
	doc, err := os.ReadFile("../../docs/olm.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, []byte(installerRBAC)) {
		t.Error("docs/olm.md does not give the installer's RBAC as test/olmv1 installs it")
	}
}
