package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/modelserver-dev/modelserver-operator/test/realenv"
)

// serviceMonitor is what Prometheus reads of a ServiceMonitor to find and
// scrape its targets.
type serviceMonitor struct {
	Spec struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Scheme        string `json:"scheme"`
			HonorLabels   bool   `json:"honorLabels"`
			Authorization struct {
				Type        string `json:"type"`
				Credentials struct {
					Name string `json:"name"`
					Key  string `json:"key"`
				} `json:"credentials"`
			} `json:"authorization"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// dist/monitoring.yaml, applied as docs/alerts.md says to a cluster with
// the Prometheus Operator's CRDs, passes their schemas, and its
// ServiceMonitor, followed as Prometheus follows it (its selector, the
// Service's EndpointSlices, the port by name, the token from its Secret),
// scrapes the operator running from its image: the failed ModelServer's
// own series is there for the alert that names it.
func TestTheOperatorsMonitoringScrapesItAsItsServiceMonitorSays(t *testing.T) {
	t.Parallel()
	e := realNode(t)
	crds := filepath.Join(e.Root, "test/testdata/prometheus-operator")
	e.kubectl(t, "", "apply", "--server-side", "-f", crds)
	t.Cleanup(func() { _, _ = e.Kubectl("", "delete", "-f", crds, "--wait=false") })
	e.kubectl(t, "", "wait", "--for=condition=Established", "--timeout=60s",
		"crd/servicemonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com")
	monitoring := filepath.Join(e.Root, "dist/monitoring.yaml")
	// kubectl validates strictly on the server: a field the schemas do
	// not have is refused.
	e.kubectl(t, "", "apply", "-f", monitoring)
	t.Cleanup(func() { _, _ = e.Kubectl("", "delete", "-f", monitoring, "--wait=false") })

	ns := e.namespace(t)
	e.kubectl(t, e.ModelServerYAML(realenv.ModelServer{Name: "missing", URI: "s3://models/half_plus_nothing", Secret: "s3-creds"}), "-n", ns, "apply", "-f", "-")
	e.waitFetchFailed(t, ns, "missing", "NotFound")

	var sm serviceMonitor
	if err := json.Unmarshal([]byte(e.kubectl(t, "", "-n", operatorNS, "get", "servicemonitor", "modelserver-operator", "-o", "json")), &sm); err != nil {
		t.Fatal(err)
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("ServiceMonitor endpoints %+v, want 1", sm.Spec.Endpoints)
	}
	ep := sm.Spec.Endpoints[0]
	if !ep.HonorLabels {
		t.Error("honorLabels is off: the ModelServers' namespace label would be renamed exported_namespace")
	}
	ctx := context.Background()
	selector, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	services, err := e.cs.CoreV1().Services(operatorNS).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil || len(services.Items) != 1 || services.Items[0].Name != "modelserver-controller-manager-metrics-service" {
		t.Fatalf("Services the ServiceMonitor selects (%s): %+v, %v; want the metrics Service alone", selector, services, err)
	}
	var target string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		slices, err := e.cs.DiscoveryV1().EndpointSlices(operatorNS).List(ctx, metav1.ListOptions{
			LabelSelector: labels.Set{discoveryv1.LabelServiceName: services.Items[0].Name}.String()})
		if err != nil {
			return false, err
		}
		target = readyEndpoint(slices.Items, ep.Port)
		return target != "", nil
	})
	if err != nil {
		t.Fatalf("no ready endpoint with a port named %q: %v", ep.Port, err)
	}
	var token string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := e.cs.CoreV1().Secrets(operatorNS).Get(ctx, ep.Authorization.Credentials.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // made by kubectl apply above; filled in by the token controller
		}
		token = string(s.Data[ep.Authorization.Credentials.Key])
		return token != "", nil
	})
	if err != nil || ep.Authorization.Type != "Bearer" {
		t.Fatalf("the token of the ServiceMonitor's Secret %s, key %s (%s): %v", ep.Authorization.Credentials.Name, ep.Authorization.Credentials.Key, ep.Authorization.Type, err)
	}
	code, body := get(t, ep.Scheme+"://"+target+"/metrics", token)
	if code != 200 {
		t.Fatalf("scrape as the ServiceMonitor says: %d\n%s", code, body)
	}
	want := fmt.Sprintf(`modelserver_status_phase{name="missing",namespace=%q,phase="Failed",reason="NotFound"} 1`, ns)
	if !strings.Contains(body, want) {
		t.Errorf("the scrape lacks %s; it has:\n%s", want, grepLines(body, "modelserver_status_phase"))
	}
	groups := e.kubectl(t, "", "-n", operatorNS, "get", "prometheusrule", "modelserver-alerts", "-o", "jsonpath={.spec.groups[*].name}")
	if groups != "modelserver modelserver-operator" {
		t.Errorf("PrometheusRule groups %q", groups)
	}
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
