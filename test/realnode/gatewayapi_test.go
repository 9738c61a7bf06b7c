package realnode

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/modelserver-dev/modelserver-operator/internal/servingtls/tlstest"
	"github.com/modelserver-dev/modelserver-operator/test/realenv"
)

// gatewayAPICRDs are the files of the Gateway API's CRDs of the routes,
// the Gateway and the BackendTLSPolicy, of its standard channel, as its
// release at the version hack/tools/gateway-api pins ships them (its
// module holds them), from the module cache.
func gatewayAPICRDs(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/gateway-api")
	cmd.Dir = filepath.Join(root, "hack/tools/gateway-api")
	out, err := cmd.Output()
	var mod struct{ Dir, Error string }
	if err != nil || json.Unmarshal(out, &mod) != nil || mod.Dir == "" {
		t.Fatalf("download the Gateway API's module: %v %s\n%s", err, mod.Error, out)
	}
	var files []string
	for _, kind := range []string{"httproutes", "grpcroutes", "gateways", "backendtlspolicies"} {
		files = append(files, filepath.Join(mod.Dir, "config/crd/standard/gateway.networking.k8s.io_"+kind+".yaml"))
	}
	return files
}

// TestTheRoutesPassTheGatewayAPIsOwnSchemas: in a cluster with the
// Gateway API's own CRDs, of a current release, the apiserver admits the
// HTTPRoute, the GRPCRoute and the BackendTLSPolicy the operator renders
// for a ModelServer that serves gRPC over TLS behind a Gateway, by their
// schemas and validation rules: the release is deployed and the
// ModelServer Ready, its request timeout in the HTTPRoute as the Gateway
// API writes durations, and nothing is warned of (the API is new enough
// for the BackendTLSPolicy).
func TestTheRoutesPassTheGatewayAPIsOwnSchemas(t *testing.T) {
	t.Parallel()
	e := realNode(t)
	// Left installed: the operator watches these kinds once a ModelServer
	// routes through a Gateway, and the cluster goes with the suite.
	for _, crd := range gatewayAPICRDs(t, e.Root) {
		e.kubectl(t, "", "apply", "--server-side", "-f", crd)
	}
	for _, crd := range []string{"httproutes", "grpcroutes", "gateways", "backendtlspolicies"} {
		name := crd + ".gateway.networking.k8s.io"
		err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			out, err := e.Kubectl("", "get", "crd", name, "-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`)
			return err == nil && strings.TrimSpace(out) == "True", nil
		})
		if err != nil {
			t.Fatalf("CRD %s not Established: %s", name, e.kubectlOut("get", "crd", name, "-o", "jsonpath={.status}"))
		}
	}
	ns := e.namespace(t)
	// A Gateway as a platform team makes one; no controller answers for
	// its class here, so the routes are never accepted.
	e.kubectl(t, `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: models
spec:
  gatewayClassName: example
  listeners:
    - name: https
      protocol: HTTPS
      port: 443
      hostname: models.example.test
      tls:
        certificateRefs: [{name: models-example-test}]
`, "-n", ns, "apply", "-f", "-")
	server := tlstest.CA(t, "issuer").Server(t, "routed."+ns+".svc")
	tlsSecret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "routed-grpc"},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: server.CertPEM, corev1.TLSPrivateKeyKey: server.KeyPEM},
	}
	if _, err := e.cs.CoreV1().Secrets(ns).Create(context.Background(), tlsSecret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.kubectl(t, e.ModelServerYAML(realenv.ModelServer{Name: "routed", URI: halfPlusTwo, SpecExtra: `  tls:
    secretName: routed-grpc
  gateway:
    parentRefs: [{name: models, sectionName: https}]
    hostnames: [models.example.test]
    requestTimeout: 90s
`}), "-n", ns, "apply", "-f", "-")
	e.waitReady(t, ns, "routed", 3*time.Minute)

	if got := strings.TrimSpace(e.kubectl(t, "", "-n", ns, "get", "httproute", "routed", "-o", "jsonpath={.spec.rules[0].timeouts.request}")); got != "1m30s" {
		t.Errorf("the HTTPRoute's request timeout %q, want spec.gateway.requestTimeout's, 1m30s", got)
	}
	if got := strings.TrimSpace(e.kubectl(t, "", "-n", ns, "get", "grpcroute", "routed", "-o", "jsonpath={.spec.parentRefs[0].sectionName}")); got != "https" {
		t.Errorf("the GRPCRoute's listener %q, want https", got)
	}
	if got := strings.TrimSpace(e.kubectl(t, "", "-n", ns, "get", "backendtlspolicy", "routed", "-o", "jsonpath={.spec.validation.hostname}")); got != "routed."+ns+".svc" {
		t.Errorf("the BackendTLSPolicy checks the certificate for %q, want the Service's name", got)
	}
	if ms := e.get(t, ns, "routed"); len(ms.Status.Warnings) != 0 {
		t.Errorf("warnings %q, want none", ms.Status.Warnings)
	}
}
