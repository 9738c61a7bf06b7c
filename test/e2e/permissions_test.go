package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
	"github.com/modelserver-dev/modelserver-operator/test/bundle"
)

func readCSVPermissions(t *testing.T) bundle.CSV {
	t.Helper()
	csv, err := bundle.ReadCSV(repoPath("."))
	if err != nil {
		t.Fatal(err)
	}
	if len(csv.Permissions) == 0 {
		t.Fatal("the CSV grants no namespaced permissions")
	}
	return csv
}

// TestTheCSVPermissionsSufficeInOwnNamespaceMode runs the operator as the
// CSV's ServiceAccount with exactly the RBAC OLM would create for an
// OwnNamespace install, and takes the sample to Ready and away again. A
// verb missing from the CSV fails it.
func TestTheCSVPermissionsSufficeInOwnNamespaceMode(t *testing.T) {
	testCSVPermissions(t, false)
}

// TestTheCSVPermissionsSufficeInAllNamespacesMode does the same for an
// AllNamespaces install, with the ModelServer in another namespace.
func TestTheCSVPermissionsSufficeInAllNamespacesMode(t *testing.T) {
	testCSVPermissions(t, true)
}

func testCSVPermissions(t *testing.T, allNamespaces bool) {
	csv := readCSVPermissions(t)
	c := dedicatedCluster(t)
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}

	operatorNS := kubectlNamespace(t, c)
	workloadNS := operatorNS
	if allNamespaces {
		workloadNS = kubectlNamespace(t, c)
	}
	sa := grantAsOLMWould(t, cs, csv, operatorNS, allNamespaces)

	watch := operatorNS
	if allNamespaces {
		watch = ""
	}
	kubeconfig := serviceAccountKubeconfig(t, c, cs, operatorNS, sa)
	op, err := c.StartProcess("manager-"+sa, managerBinary, []string{
		"manager",
		"--kubeconfig=" + kubeconfig,
		"--watch-namespaces=" + watch,
		"--leader-elect",
		"--leader-election-namespace=" + operatorNS,
		"--metrics-bind-address=0",
		"--health-probe-bind-address=127.0.0.1:0",
		"--fetch-image=example.com/modelserver-operator:e2e",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("operator log (tail):\n%s", op.LogTail(60))
		}
	})

	kubectl(t, c, "apply", "-n", workloadNS, "-f", repoPath("config/samples/serving_v1alpha1_modelserver.yaml"))
	kubectl(t, c, "wait", "-n", workloadNS, "--for=condition=Ready", "ms/resnet", "--timeout=90s")
	kubectl(t, c, "delete", "-n", workloadNS, "ms/resnet", "--wait", "--timeout=60s")
	// The garbage collector removes the release records after the
	// ModelServer is gone.
	checkNothingLeft(t, c, workloadNS, "resnet")
	if out := readFile(op.LogFile()); containsForbidden(out) {
		t.Errorf("the operator was refused something:\n%s", op.LogTail(40))
	}
}

// grantAsOLMWould creates the CSV's ServiceAccount and the RBAC that OLM
// derives from the CSV: `permissions` as Roles in the operator's namespace
// (OwnNamespace) or as ClusterRoles (AllNamespaces), `clusterPermissions`
// as ClusterRoles. It returns the ServiceAccount's name.
func grantAsOLMWould(t *testing.T, cs kubernetes.Interface, csv bundle.CSV, ns string, allNamespaces bool) string {
	t.Helper()
	ctx := context.Background()
	sa := csv.Permissions[0].ServiceAccountName
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}
	clusterWide := func(i int, p bundle.Permission, kind string) {
		name := fmt.Sprintf("%s-%s-%s-%d", ns, sa, kind, i)
		if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: p.Rules}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   subject,
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range csv.Permissions {
		if p.ServiceAccountName != sa {
			t.Fatalf("the CSV's permissions name two ServiceAccounts: %s and %s", sa, p.ServiceAccountName)
		}
		if allNamespaces {
			clusterWide(i, p, "ns")
			continue
		}
		name := fmt.Sprintf("%s-%d", sa, i)
		if _, err := cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: p.Rules}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   subject,
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range csv.ClusterPermissions {
		clusterWide(i, p, "cluster")
	}
	return sa
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as the
// ServiceAccount with a bound token, as the operator's pod would.
func serviceAccountKubeconfig(t *testing.T, c *localcluster.Cluster, cs kubernetes.Interface, ns, sa string) string {
	t.Helper()
	expiry := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: c.Config.CAData}
	cfg.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["sa"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: sa, Namespace: ns}
	cfg.CurrentContext = "sa"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// containsForbidden says whether the operator's log shows a request the
// apiserver refused for want of permission.
func containsForbidden(log string) bool {
	return strings.Contains(log, "is forbidden") || strings.Contains(log, "Forbidden")
}
