// Package e2e drives the operator binary against the local control plane the
// way a user's cluster would run it.
package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
	"github.com/modelserver-dev/modelserver-operator/test/scrape"
)

// managerBinary is the operator, built once for the suite.
var managerBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "modelserver-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	managerBinary = filepath.Join(dir, "manager")
	build := exec.Command("go", "build", "-o", managerBinary, "github.com/modelserver-dev/modelserver-operator/cmd/manager")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build manager:", err)
		os.Exit(1)
	}
	code := m.Run()
	stopSharedOperator()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

const leaseName = "modelserver-operator.serving.modelserver.dev"

func TestOperatorServesProbesAndSecureMetricsAndHandsBackItsLease(t *testing.T) {
	c := localcluster.ForTest(t, localcluster.Options{})
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	probeAddr, metricsAddr := freeAddr(t), freeAddr(t)

	op, err := c.StartProcess("manager", managerBinary, []string{
		"manager",
		"--kubeconfig=" + c.Kubeconfig,
		"--leader-elect",
		"--leader-election-namespace=default",
		"--health-probe-bind-address=" + probeAddr,
		"--metrics-bind-address=" + metricsAddr,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("operator log:\n%s", readFile(op.LogFile()))
		}
	})

	waitFor(t, 60*time.Second, "operator /readyz", func(ctx context.Context) (bool, error) {
		resp, err := http.Get("http://" + probeAddr + "/readyz")
		if err != nil {
			return false, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	waitFor(t, 60*time.Second, "operator holds the leader Lease", func(ctx context.Context) (bool, error) {
		l, err := cs.CoordinationV1().Leases("default").Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return ptr.Deref(l.Spec.HolderIdentity, "") != "", nil
	})

	// Metrics are served over TLS and only to callers the apiserver
	// authenticates and authorizes (TokenReview + SubjectAccessReview).
	metricsURL := "https://" + metricsAddr + "/metrics"
	// The metrics server starts beside the probes, not before them.
	waitFor(t, 30*time.Second, "metrics endpoint listening", func(context.Context) (bool, error) {
		_, _, err := scrapeOperator(metricsURL, "")
		return err == nil, err
	})
	if code, _, _ := scrapeOperator(metricsURL, ""); code != http.StatusUnauthorized {
		t.Errorf("anonymous scrape: status %d, want 401", code)
	}
	token := scraperToken(t, cs)
	code, body, err := scrapeOperator(metricsURL, token)
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusOK || !strings.Contains(body, "controller_runtime_") {
		t.Errorf("authorized scrape: status %d, controller-runtime metrics present: %v", code, strings.Contains(body, "controller_runtime_"))
	}

	if err := op.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-op.Exited():
		if op.Err() != nil {
			t.Errorf("operator exited with %v after SIGTERM, want a clean exit", op.Err())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("operator still running 30s after SIGTERM")
	}
	l, err := cs.CoordinationV1().Leases("default").Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != "" {
		t.Errorf("lease still held by %q after a clean shutdown; a successor would wait out the lease", h)
	}
}

// scraperToken returns a token of a ServiceAccount bound to the
// metrics-reader role from config/rbac.
func scraperToken(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "prometheus", Namespace: "default"}}
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: sa.Namespace}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

func scrapeOperator(url, token string) (int, string, error) {
	return scrape.Get(url, token, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the operator serves a self-signed certificate on loopback
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		last = err
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %s (last error: %v)", what, timeout, last)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

func readFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
