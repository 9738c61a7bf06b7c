package olmv1

import "fmt"

// What the tests install, named as docs/olm.md names it.
const (
	catalogName        = "modelserver-catalog"
	extensionName      = "modelserver-operator"
	installNS          = "modelserver-system"
	installerSA        = "modelserver-installer"
	operatorDeployment = "modelserver-controller-manager"
	operatorCRD        = "modelservers.serving.modelserver.dev"
)

// installerRBAC is the namespace OLM v1 installs into, the ServiceAccount
// it installs as, and the least that account must be allowed for the
// install and upgrades of the bundle (bundle/manifests). OLM v1 installs a
// registry+v1 bundle as a Helm release, as the account:
//
//   - it creates the bundle's objects: the CRD, the operator's
//     ServiceAccount, the metrics Service, the Deployment, the
//     metrics-reader ClusterRole, and a ClusterRole and ClusterRoleBinding
//     for each of the CSV's clusterPermissions and permissions (in
//     AllNamespaces mode, permissions become cluster-wide too);
//   - it gets each one by name first (Helm refuses to take over what
//     exists), and patches them on an upgrade;
//   - it lists and watches every kind of them across namespaces: OLM
//     watches what it installed with cluster-wide informers, and reports
//     Progressing=False until it can;
//   - Kubernetes lets nobody grant a permission they lack, so the account
//     holds every rule the ClusterRoles it creates grant. The alternative,
//     escalate and bind, would let it grant anything.
//
// The generated ClusterRoles are named after the first characters of the
// CSV's name and a hash of their rules: a release that changes the
// operator's permissions gets new names, which this list must then name
// (OLM's Progressing message does), keeping the old ones for OLM to delete.
// Services and Deployments need no rule of their own: the operator's rules,
// which the account holds cluster-wide, cover them. Finalizers of the
// ClusterExtension are for the ownerReferences (blockOwnerDeletion) OLM
// sets, which the OwnerReferencesPermissionEnforcement admission plugin
// checks where it is enabled.
const installerRBAC = `apiVersion: v1
kind: Namespace
metadata:
  name: modelserver-system
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: modelserver-installer
  namespace: modelserver-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: modelserver-installer
rules:
# OLM's ownerReferences on what it installs.
- apiGroups: [olm.operatorframework.io]
  resources: [clusterextensions/finalizers]
  verbs: [update]
  resourceNames: [modelserver-operator]
# The bundle's CRD.
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [create, list, watch]
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [get, patch]
  resourceNames: [modelservers.serving.modelserver.dev]
# The ClusterRoles and bindings OLM generates from the CSV's
# clusterPermissions and permissions, named after a hash of their rules,
# and the bundle's metrics-reader ClusterRole.
- apiGroups: [rbac.authorization.k8s.io]
  resources: [clusterroles, clusterrolebindings]
  verbs: [create, list, watch]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [clusterroles]
  verbs: [get, patch, delete]
  resourceNames:
  - modelserver-operato-gndyyx9umcvdlx9htvr2x2vji6zg3x48dqumu16pg1r
  - modelserver-operat-2ufa7awmhi620wx3vq6zhnxslipgtlvb2cue2g4qw0xd
  - modelserver-operat-1s05rcsur3tlub5kov4qdbqd5b52w8y4cucinkgr323s
  - modelserver-operat-1965anjlkbovzjbgd0fk4nby1vtd2xtb203awn1pyw9t
  - modelserver-operat-10gcf3j2pevp1ptpoxey6x673mtxtd1aawrzx0iek7up
  - modelserver-operat-2rku4cv2rz193tvfwj2fr0tunz8tfd27z8fpya7krtn4
  - modelserver-operat-2pvynybmawjjy1cobik4yo6slh93mieccpgsfqojs5w2
  - modelserver-operat-25t6j4lsyfpvzfr4bq4zhy4tti8uigvwup8xbvu98rsj
  - modelserver-operato-zuh2yltlkqi0zhujffaxczepemqhzsnw8sni8r1tsxj
  - modelserver-operato-gxnoxbdeyj8oubrc3hr6th8dhn7hisu7qnd4betvt8n
  - modelserver-metrics-reader
- apiGroups: [rbac.authorization.k8s.io]
  resources: [clusterrolebindings]
  verbs: [get, patch, delete]
  resourceNames:
  - modelserver-operato-gndyyx9umcvdlx9htvr2x2vji6zg3x48dqumu16pg1r
  - modelserver-operat-2ufa7awmhi620wx3vq6zhnxslipgtlvb2cue2g4qw0xd
  - modelserver-operat-1s05rcsur3tlub5kov4qdbqd5b52w8y4cucinkgr323s
  - modelserver-operat-1965anjlkbovzjbgd0fk4nby1vtd2xtb203awn1pyw9t
  - modelserver-operat-10gcf3j2pevp1ptpoxey6x673mtxtd1aawrzx0iek7up
  - modelserver-operat-2rku4cv2rz193tvfwj2fr0tunz8tfd27z8fpya7krtn4
  - modelserver-operat-2pvynybmawjjy1cobik4yo6slh93mieccpgsfqojs5w2
  - modelserver-operat-25t6j4lsyfpvzfr4bq4zhy4tti8uigvwup8xbvu98rsj
  - modelserver-operato-zuh2yltlkqi0zhujffaxczepemqhzsnw8sni8r1tsxj
  - modelserver-operato-gxnoxbdeyj8oubrc3hr6th8dhn7hisu7qnd4betvt8n
# OLM watches the operator's ServiceAccount across namespaces.
- apiGroups: [""]
  resources: [serviceaccounts]
  verbs: [list, watch]
# What the operator's ClusterRoles grant, which one must hold to grant:
# the CSV's clusterPermissions...
- apiGroups: [authentication.k8s.io]
  resources: [tokenreviews]
  verbs: [create]
- apiGroups: [authorization.k8s.io]
  resources: [subjectaccessreviews]
  verbs: [create]
- apiGroups: [networking.k8s.io]
  resources: [ingressclasses]
  verbs: [list]
# ...its permissions, cluster-wide in AllNamespaces mode...
- apiGroups: [""]
  resources: [configmaps, persistentvolumeclaims, secrets, services]
  verbs: [create, delete, get, list, patch, update, watch]
- apiGroups: [""]
  resources: [events]
  verbs: [create, list, patch, watch]
- apiGroups: [""]
  resources: [pods, serviceaccounts]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [pods/log]
  verbs: [get]
- apiGroups: [""]
  resources: [pods/eviction]
  verbs: [create]
- apiGroups: [apps]
  resources: [deployments]
  verbs: [create, delete, get, list, patch, update, watch]
- apiGroups: [autoscaling]
  resources: [horizontalpodautoscalers]
  verbs: [create, delete, get, list, patch, update, watch]
- apiGroups: [batch]
  resources: [jobs]
  verbs: [create, delete, get, list, patch, update, watch]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [gateway.networking.k8s.io]
  resources: [backendtlspolicies, grpcroutes, httproutes]
  verbs: [create, delete, get, list, patch, update, watch]
- apiGroups: [gateway.networking.k8s.io]
  resources: [gateways]
  verbs: [get, list, watch]
- apiGroups: [monitoring.coreos.com]
  resources: [servicemonitors]
  verbs: [create, delete, get, list, patch, update, watch]
- apiGroups: [networking.k8s.io]
  resources: [ingresses, networkpolicies]
  verbs: [create, delete, get, list, patch, update, watch]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [create, delete, get, list, patch, update, watch]
- apiGroups: [serving.modelserver.dev]
  resources: [modelservers]
  verbs: [get, list, patch, update, watch]
- apiGroups: [serving.modelserver.dev]
  resources: [modelservers/finalizers]
  verbs: [update]
- apiGroups: [serving.modelserver.dev]
  resources: [modelservers/status]
  verbs: [get, patch, update]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [create, delete, get, list, patch, update, watch]
# ...and the bundle's metrics-reader ClusterRole.
- nonResourceURLs: [/metrics]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: modelserver-installer
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: modelserver-installer
subjects:
- kind: ServiceAccount
  name: modelserver-installer
  namespace: modelserver-system
---
# The operator's ServiceAccount, in the install namespace only.
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: modelserver-installer
  namespace: modelserver-system
rules:
- apiGroups: [""]
  resources: [serviceaccounts]
  verbs: [create]
- apiGroups: [""]
  resources: [serviceaccounts]
  verbs: [get, patch]
  resourceNames: [modelserver-controller-manager]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: modelserver-installer
  namespace: modelserver-system
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: modelserver-installer
subjects:
- kind: ServiceAccount
  name: modelserver-installer
  namespace: modelserver-system
`

// clusterCatalog serves a catalog image to OLM v1.
func clusterCatalog(image string) string {
	return fmt.Sprintf(`apiVersion: olm.operatorframework.io/v1
kind: ClusterCatalog
metadata:
  name: %s
spec:
  source:
    type: Image
    image:
      ref: %s
`, catalogName, image)
}

// clusterExtension installs version of the package from the channel, as
// the installer ServiceAccount.
func clusterExtension(packageName, channel, version string) string {
	return fmt.Sprintf(`apiVersion: olm.operatorframework.io/v1
kind: ClusterExtension
metadata:
  name: %s
spec:
  namespace: %s
  serviceAccount:
    name: %s
  source:
    sourceType: Catalog
    catalog:
      packageName: %s
      channels: [%s]
      version: %q
`, extensionName, installNS, installerSA, packageName, channel, version)
}
