// Package bundle reads the OLM bundle's ClusterServiceVersion as the
// tests that install the operator as OLM would need it: its name and the
// permissions it asks for.
package bundle

import (
	"fmt"
	"os"
	"path/filepath"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// CSV is the part of the ClusterServiceVersion that names it and says
// what the operator may do.
type CSV struct {
	Name string
	// Permissions are namespaced, unless OLM installs the operator for
	// all namespaces; ClusterPermissions are cluster-wide.
	Permissions, ClusterPermissions []Permission
}

// Permission is one of a CSV's permissions, with the fields, in the
// order, of operator-framework/api's StrategyDeploymentPermissions, so
// that its JSON is that type's: OLM v1 names the roles it makes by a hash
// of it.
type Permission struct {
	ServiceAccountName string              `json:"serviceAccountName"`
	Rules              []rbacv1.PolicyRule `json:"rules"`
}

// ReadCSV reads the one ClusterServiceVersion in root's bundle/manifests.
func ReadCSV(root string) (CSV, error) {
	files, err := filepath.Glob(filepath.Join(root, "bundle", "manifests", "*.clusterserviceversion.yaml"))
	if err != nil || len(files) != 1 {
		return CSV{}, fmt.Errorf("want one CSV in bundle/manifests, found %v (%v)", files, err)
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		return CSV{}, err
	}
	var doc struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Install struct {
				Spec struct {
					Permissions        []Permission `json:"permissions"`
					ClusterPermissions []Permission `json:"clusterPermissions"`
				} `json:"spec"`
			} `json:"install"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return CSV{}, fmt.Errorf("%s: %w", files[0], err)
	}
	strategy := doc.Spec.Install.Spec
	return CSV{Name: doc.Metadata.Name, Permissions: strategy.Permissions, ClusterPermissions: strategy.ClusterPermissions}, nil
}
