package realnode

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/modelserver-dev/modelserver-operator/internal/servingtls/tlstest"
	"github.com/modelserver-dev/modelserver-operator/test/realenv"
	"github.com/modelserver-dev/modelserver-operator/test/scrape"
)

// secretKey is a key of a Secret in the ServiceMonitor's namespace.
type secretKey struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// serviceMonitor is what Prometheus reads of a ServiceMonitor to find and
// scrape its targets.
type serviceMonitor struct {
	Spec struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Scheme        string `json:"scheme"`
			HonorLabels   bool   `json:"honorLabels"`
			Authorization struct {
				Type        string    `json:"type"`
				Credentials secretKey `json:"credentials"`
			} `json:"authorization"`
			TLSConfig struct {
				InsecureSkipVerify bool   `json:"insecureSkipVerify"`
				ServerName         string `json:"serverName"`
				CA                 struct {
					Secret secretKey `json:"secret"`
				} `json:"ca"`
			} `json:"tlsConfig"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// dist/monitoring.yaml, applied as docs/alerts.md says to a cluster with
// the Prometheus Operator's CRDs, passes their schemas, and its
// ServiceMonitor, followed as Prometheus follows it (its selector, the
// Service's EndpointSlices, the port by name, the token from its Secret),
// scrapes the operator running from its image: the failed ModelServer's
// own series is there for the alert that names it. A ModelServer's own
// ServiceMonitor, which the operator renders once the API is there, passes
// the schema too, and scrapes TF Serving's metrics (the double's) as the
// serving alerts and the dashboard read them. The dashboard's ConfigMap
// holds it whole.
func TestTheOperatorsMonitoringScrapesItAsItsServiceMonitorSays(t *testing.T) {
	t.Parallel()
	e := realNode(t)
	crds := filepath.Join(e.Root, "test/testdata/prometheus-operator")
	e.kubectl(t, "", "apply", "--server-side", "-f", crds)
	t.Cleanup(func() { _, _ = e.Kubectl("", "delete", "-f", crds, "--wait=false") })
	// Polled rather than kubectl wait's: a CRD read before the apiserver
	// first writes its status has conditions: null, which kubectl wait
	// fails on (".status.conditions accessor error") instead of waiting.
	for _, crd := range []string{"servicemonitors.monitoring.coreos.com", "prometheusrules.monitoring.coreos.com"} {
		err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			out, err := e.Kubectl("", "get", "crd", crd, "-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`)
			return err == nil && strings.TrimSpace(out) == "True", nil
		})
		if err != nil {
			t.Fatalf("CRD %s not Established: %s", crd, e.kubectlOut("get", "crd", crd, "-o", "jsonpath={.status}"))
		}
	}
	monitoring := filepath.Join(e.Root, "dist/monitoring.yaml")
	// kubectl validates strictly on the server: a field the schemas do
	// not have is refused.
	e.kubectl(t, "", "apply", "-f", monitoring)
	t.Cleanup(func() { _, _ = e.Kubectl("", "delete", "-f", monitoring, "--wait=false") })

	ns := e.namespace(t)
	e.kubectl(t, e.ModelServerYAML(realenv.ModelServer{Name: "missing", URI: "s3://models/half_plus_nothing"}), "-n", ns, "apply", "-f", "-")
	e.kubectl(t, e.ModelServerYAML(realenv.ModelServer{Name: "scraped", URI: halfPlusTwo, SpecExtra: "  monitoring:\n    serviceMonitor: {}\n    p99Latency: 250ms\n    availability: \"99.9\"\n"}), "-n", ns, "apply", "-f", "-")
	e.waitFetchFailed(t, ns, "missing", "NotFound")

	sm, body := e.scrapeAsServiceMonitorSays(t, operatorNS, "modelserver-operator")
	if !sm.Spec.Endpoints[0].HonorLabels {
		t.Error("honorLabels is off: the ModelServers' namespace label would be renamed exported_namespace")
	}
	want := fmt.Sprintf(`modelserver_status_phase{name="missing",namespace=%q,phase="Failed",reason="NotFound"} 1`, ns)
	if !strings.Contains(body, want) {
		t.Errorf("the operator's scrape lacks %s; it has:\n%s", want, grepLines(body, "modelserver_status_phase"))
	}
	groups := e.kubectl(t, "", "-n", operatorNS, "get", "prometheusrule", "modelserver-alerts", "-o", "jsonpath={.spec.groups[*].name}")
	if groups != "modelserver modelserver-serving modelserver-operator" {
		t.Errorf("PrometheusRule groups %q", groups)
	}
	// The dashboard, whole, where Grafana's sidecar finds it.
	dashboard, err := os.ReadFile(filepath.Join(e.Root, "config/grafana/dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	cm, err := e.cs.CoreV1().ConfigMaps(operatorNS).Get(context.Background(), "modelserver-dashboard", metav1.GetOptions{})
	if err != nil || cm.Labels["grafana_dashboard"] != "1" || cm.Data["modelserver.json"] != string(dashboard) {
		t.Errorf("the dashboard's ConfigMap: labels %v, %d bytes of dashboard (want %d), %v", cm.Labels, len(cm.Data["modelserver.json"]), len(dashboard), err)
	}

	// From here on, the ServiceMonitor verifies the operator's
	// certificate.
	e.verifyWithCertManagersCertificate(t)

	e.waitReady(t, ns, "scraped", 3*time.Minute)
	// Made by the operator once it sees the API: at once, or at its look
	// for missing APIs, every minute.
	if _, err := e.Kubectl("", "-n", ns, "wait", "--for=create", "servicemonitor/scraped", "--timeout=90s"); err != nil {
		t.Fatalf("no ServiceMonitor for the ModelServer: %v\nstatus: %s", err, e.kubectlOut("-n", ns, "get", "modelserver", "scraped", "-o", "jsonpath={.status}"))
	}
	// Its objectives, beside its phase, scraped as the now verifying
	// ServiceMonitor says.
	_, body = e.scrapeAsServiceMonitorSays(t, operatorNS, "modelserver-operator")
	for _, want := range []string{
		fmt.Sprintf(`modelserver_latency_objective_seconds{name="scraped",namespace=%q} 0.25`, ns),
		fmt.Sprintf(`modelserver_availability_objective_ratio{name="scraped",namespace=%q} 0.999`, ns),
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the operator's scrape lacks %s; it has:\n%s", want, grepLines(body, "_objective_"))
		}
	}
	// The readiness probe's requests, and the version's load.
	_, body = e.scrapeAsServiceMonitorSays(t, ns, "scraped")
	for _, want := range []string{
		fmt.Sprintf(`:tensorflow:serving:request_count{model_name=%q,status="OK"}`, realenv.ModelName),
		`:tensorflow:cc:saved_model:load_attempt_count{model_path="`,
		fmt.Sprintf(`:tensorflow:serving:request_latency_bucket{model_name=%q,`, realenv.ModelName),
	} {
		if !strings.Contains(body, want) {
			t.Errorf("TF Serving's scrape lacks %s; it has:\n%s", want, grepLines(body, ":tensorflow:"))
		}
	}
}

// verifyWithCertManagersCertificate applies config/prometheus-cert-manager
// as `kubectl apply -k` does, less cert-manager's own objects (no
// cert-manager runs here), and writes the Secret its endpoint Certificate
// names as cert-manager would: the certificate for its dnsNames, its key
// and its CA's certificate. The kubelet mounts it in the running
// operator's pod, which serves it; the ServiceMonitor, which now verifies
// the endpoint by that CA and the name, scrapes it.
func (e *env) verifyWithCertManagersCertificate(t *testing.T) {
	t.Helper()
	// certificate is what the test reads of cert-manager's Certificate.
	type certificate struct {
		IsCA       bool     `json:"isCA"`
		SecretName string   `json:"secretName"`
		DNSNames   []string `json:"dnsNames"`
	}
	var (
		docs   []string
		server certificate
	)
	for doc := range strings.SplitSeq(e.kubectl(t, "", "kustomize", filepath.Join(e.Root, "config/prometheus-cert-manager")), "\n---\n") {
		var obj struct {
			APIVersion string      `json:"apiVersion"`
			Kind       string      `json:"kind"`
			Spec       certificate `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		switch {
		case !strings.HasPrefix(obj.APIVersion, "cert-manager.io/"):
			docs = append(docs, doc)
		case obj.Kind == "Certificate" && !obj.Spec.IsCA:
			server = obj.Spec
		}
	}
	if server.SecretName == "" || len(server.DNSNames) == 0 {
		t.Fatalf("config/prometheus-cert-manager has no certificate for the metrics endpoint: %+v", server)
	}
	e.kubectl(t, strings.Join(docs, "\n---\n"), "apply", "-f", "-")

	ca := tlstest.CA(t, "modelserver-metrics-ca")
	cert := ca.Server(t, server.DNSNames...)
	ctx := context.Background()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: server.SecretName, Namespace: operatorNS},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: cert.CertPEM, corev1.TLSPrivateKeyKey: cert.KeyPEM, "ca.crt": ca.CertPEM},
	}
	if _, err := e.cs.CoreV1().Secrets(operatorNS).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.cs.CoreV1().Secrets(operatorNS).Delete(context.Background(), server.SecretName, metav1.DeleteOptions{})
	})

	sm, scrape := e.followServiceMonitor(t, operatorNS, "modelserver-operator")
	if tc := sm.Spec.Endpoints[0].TLSConfig; tc.InsecureSkipVerify || tc.ServerName == "" {
		t.Fatalf("the ServiceMonitor does not verify the endpoint: %+v", tc)
	}
	start := time.Now()
	var code int
	var body string
	var err error
	for ; time.Since(start) < 2*time.Minute; time.Sleep(time.Second) {
		if code, body, err = scrape(); err == nil {
			break
		}
	}
	if err != nil || code != 200 || !strings.Contains(body, "modelserver_status_phase") {
		t.Fatalf("the operator's scrape verified by the CA, %s after the Secret: %d, %v", time.Since(start).Round(time.Second), code, err)
	}
	t.Logf("the operator served the mounted certificate %s after the Secret was written", time.Since(start).Round(time.Second))
}

// scrapeAsServiceMonitorSays finds the ServiceMonitor's target as
// Prometheus does (the Services its selector picks in its namespace, one
// ready endpoint of their EndpointSlices at its endpoint's port, by name)
// and scrapes it with its scheme, path, token and TLS settings.
func (e *env) scrapeAsServiceMonitorSays(t *testing.T, ns, name string) (serviceMonitor, string) {
	t.Helper()
	sm, scrape := e.followServiceMonitor(t, ns, name)
	code, body, err := scrape()
	if err != nil || code != 200 {
		t.Fatalf("scrape as the ServiceMonitor %s/%s says: %d, %v\n%s", ns, name, code, err, body)
	}
	return sm, body
}

// followServiceMonitor reads the ServiceMonitor, finds its target and
// returns what scrapes it.
func (e *env) followServiceMonitor(t *testing.T, ns, name string) (serviceMonitor, func() (int, string, error)) {
	t.Helper()
	var sm serviceMonitor
	if err := json.Unmarshal([]byte(e.kubectl(t, "", "-n", ns, "get", "servicemonitor", name, "-o", "json")), &sm); err != nil {
		t.Fatal(err)
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("ServiceMonitor %s/%s endpoints %+v, want 1", ns, name, sm.Spec.Endpoints)
	}
	ep := sm.Spec.Endpoints[0]
	ctx := context.Background()
	selector, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	services, err := e.cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil || len(services.Items) != 1 {
		t.Fatalf("Services the ServiceMonitor %s/%s selects (%s): %+v, %v; want one", ns, name, selector, services, err)
	}
	var target string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		slices, err := e.cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
			LabelSelector: labels.Set{discoveryv1.LabelServiceName: services.Items[0].Name}.String()})
		if err != nil {
			return false, err
		}
		target = readyEndpoint(slices.Items, ep.Port)
		return target != "", nil
	})
	if err != nil {
		t.Fatalf("Service %s/%s: no ready endpoint with a port named %q: %v", ns, services.Items[0].Name, ep.Port, err)
	}
	var token string
	if c := ep.Authorization.Credentials; c.Name != "" {
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			s, err := e.cs.CoreV1().Secrets(ns).Get(ctx, c.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil //nolint:nilerr // applied by the test; filled in by the token controller
			}
			token = string(s.Data[c.Key])
			return token != "", nil
		})
		if err != nil || ep.Authorization.Type != "Bearer" {
			t.Fatalf("the token of the ServiceMonitor's Secret %s, key %s (%s): %v", c.Name, c.Key, ep.Authorization.Type, err)
		}
	}
	tlsConfig := &tls.Config{
		InsecureSkipVerify: ep.TLSConfig.InsecureSkipVerify, //nolint:gosec // as the ServiceMonitor says
		ServerName:         ep.TLSConfig.ServerName,
		MinVersion:         tls.VersionTLS12,
	}
	if ca := ep.TLSConfig.CA.Secret; ca.Name != "" {
		s, err := e.cs.CoreV1().Secrets(ns).Get(ctx, ca.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the CA of the ServiceMonitor %s/%s: %v", ns, name, err)
		}
		tlsConfig.RootCAs = x509.NewCertPool()
		if !tlsConfig.RootCAs.AppendCertsFromPEM(s.Data[ca.Key]) {
			t.Fatalf("the CA of the ServiceMonitor %s/%s, Secret %s key %s, holds no certificate", ns, name, ca.Name, ca.Key)
		}
	}
	url := cmp.Or(ep.Scheme, "http") + "://" + target + cmp.Or(ep.Path, "/metrics")
	return sm, func() (int, string, error) { return scrape.Get(url, token, tlsConfig) }
}

// readyEndpoint is address:port of a ready endpoint of the slices, at
// their port named port, or "".
func readyEndpoint(slices []discoveryv1.EndpointSlice, port string) string {
	for _, s := range slices {
		for _, p := range s.Ports {
			if p.Name == nil || *p.Name != port || p.Port == nil {
				continue
			}
			for _, ep := range s.Endpoints {
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready && len(ep.Addresses) > 0 {
					return net.JoinHostPort(ep.Addresses[0], fmt.Sprint(*p.Port))
				}
			}
		}
	}
	return ""
}

// grepLines are the lines of text that hold s.
func grepLines(text, s string) string {
	var out []string
	for line := range strings.SplitSeq(text, "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
