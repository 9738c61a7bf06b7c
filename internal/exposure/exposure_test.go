package exposure

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

func TestAnIngressIsAWayInOnceItHasAnAddress(t *testing.T) {
	addressed := &networkingv1.Ingress{Status: networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{
		Ingress: []networkingv1.IngressLoadBalancerIngress{{IP: "198.18.0.20"}}}}}
	for _, tc := range []struct {
		name string
		spec values.Ingress
		ing  *networkingv1.Ingress
		want string
	}{
		{"not made yet", values.Ingress{Host: "m.example.test"}, nil, ""},
		{"no address yet", values.Ingress{Host: "m.example.test"}, &networkingv1.Ingress{}, ""},
		{"plain HTTP", values.Ingress{Host: "m.example.test"}, addressed, "http://m.example.test/v1/models/mnist"},
		{"TLS", values.Ingress{Host: "m.example.test", TLSSecretName: "cert"}, addressed, "https://m.example.test/v1/models/mnist"},
		{"a wildcard host names no URL", values.Ingress{Host: "*.example.test"}, addressed, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep, ok := FromIngress(&tc.spec, tc.ing, "mnist")
			if ok != (tc.want != "") || ep.REST != tc.want || (ok && ep.Via != "Ingress") {
				t.Errorf("FromIngress = %+v, %v; want REST %q", ep, ok, tc.want)
			}
		})
	}
}

func TestAnIngressThatNoControllerServesIsAProblem(t *testing.T) {
	class := func(name string, dflt bool) networkingv1.IngressClass {
		c := networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if dflt {
			c.Annotations = map[string]string{"ingressclass.kubernetes.io/is-default-class": "true"}
		}
		return c
	}
	for _, tc := range []struct {
		name    string
		spec    values.Ingress
		classes []networkingv1.IngressClass
		want    string
	}{
		{"the class exists", values.Ingress{ClassName: "nginx"}, []networkingv1.IngressClass{class("nginx", false)}, ""},
		{"no such class", values.Ingress{ClassName: "ngnix"}, []networkingv1.IngressClass{class("nginx", false)},
			`spec.ingress.className: the cluster has no IngressClass "ngnix"; no ingress controller will serve the Ingress`},
		{"no class named, a default", values.Ingress{}, []networkingv1.IngressClass{class("a", false), class("b", true)}, ""},
		{"no class named, no default", values.Ingress{}, []networkingv1.IngressClass{class("a", false), class("b", false)},
			"spec.ingress: no className, and none of the cluster's IngressClasses (a, b) is its default; name one in className"},
		{"no class at all", values.Ingress{}, nil,
			"spec.ingress: the cluster has no IngressClass, so no ingress controller; the Ingress is served by none"},
		{"the annotation that chose a controller before classes", values.Ingress{ClassName: "x", Annotations: map[string]string{"kubernetes.io/ingress.class": "nginx"}}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IngressClassProblem(&tc.spec, tc.classes); got != tc.want {
				t.Errorf("IngressClassProblem = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestALoadBalancerIsAWayInOnceItHasAnAddress(t *testing.T) {
	lb := func(ing ...corev1.LoadBalancerIngress) *corev1.Service {
		s := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
		s.Status.LoadBalancer.Ingress = ing
		return s
	}
	for _, tc := range []struct {
		name       string
		svc        *corev1.Service
		rest, grpc string
	}{
		{"no address yet", lb(), "", ""},
		{"an IP", lb(corev1.LoadBalancerIngress{IP: "198.18.0.21"}), "http://198.18.0.21:8501/v1/models/m", "198.18.0.21:8500"},
		{"a hostname", lb(corev1.LoadBalancerIngress{Hostname: "lb.example.test"}), "http://lb.example.test:8501/v1/models/m", "lb.example.test:8500"},
		{"IPv6", lb(corev1.LoadBalancerIngress{IP: "::1"}), "http://[::1]:8501/v1/models/m", "[::1]:8500"},
		{"a ClusterIP Service", &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep, ok := FromLoadBalancer(tc.svc, 8501, 8500, "m")
			if ok != (tc.rest != "") || ep.REST != tc.rest || ep.GRPC != tc.grpc {
				t.Errorf("FromLoadBalancer = %+v, %v; want %q, %q", ep, ok, tc.rest, tc.grpc)
			}
		})
	}
}

func parent(ns, name, section string, conds ...metav1.Condition) RouteParent {
	return RouteParent{Namespace: ns, Name: name, SectionName: section, Conditions: conds}
}

func cond(t string, s metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg}
}

var accepted = cond("Accepted", metav1.ConditionTrue, "Accepted", "")

func TestGatewaysThatAcceptTheRoutesAreWaysIn(t *testing.T) {
	public := &Gateway{Namespace: "infra", Name: "public", Listeners: []Listener{
		{Name: "http", Protocol: "HTTP", Port: 80},
		{Name: "https", Protocol: "HTTPS", Port: 443, Hostname: "*.example.test"},
	}, Addresses: []string{"198.18.0.30"}}
	internal := &Gateway{Namespace: "ml", Name: "internal", Listeners: []Listener{
		{Name: "web", Protocol: "HTTP", Port: 8080},
	}, Addresses: []string{"198.18.0.31"}}
	gws := map[string]*Gateway{"infra/public": public, "ml/internal": internal}
	refs := []values.ParentRef{{Name: "public", Namespace: "infra"}, {Name: "internal"}}
	both := func(p ...RouteParent) []Route {
		return []Route{{Kind: "HTTPRoute", Name: "m", Parents: p}, {Kind: "GRPCRoute", Name: "m", Parents: p}}
	}
	for _, tc := range []struct {
		name      string
		spec      values.Routes
		routes    []Route
		want      []servingv1alpha1.ExternalEndpoint
		problems  []string
		pending   bool
		gatewayed map[string]*Gateway
	}{
		{name: "no Gateway has said anything yet", spec: values.Routes{ParentRefs: refs}, routes: both(), pending: true},
		{name: "a hostname the HTTPS listener answers for", spec: values.Routes{ParentRefs: refs[:1], Hostnames: []string{"*.example.test", "m.example.test"}},
			routes: both(parent("infra", "public", "", accepted)),
			want:   []servingv1alpha1.ExternalEndpoint{{Via: "Gateway infra/public", REST: "https://m.example.test/v1/models/m", GRPC: "m.example.test:443"}}},
		{name: "no hostname: the address, on a listener for any host", spec: values.Routes{ParentRefs: refs},
			routes: both(parent("infra", "public", "", accepted), parent("ml", "internal", "", accepted)),
			want: []servingv1alpha1.ExternalEndpoint{
				{Via: "Gateway infra/public", REST: "http://198.18.0.30/v1/models/m", GRPC: "198.18.0.30:80"},
				{Via: "Gateway ml/internal", REST: "http://198.18.0.31:8080/v1/models/m", GRPC: "198.18.0.31:8080"}}},
		{name: "the listener named", spec: values.Routes{ParentRefs: []values.ParentRef{{Name: "public", Namespace: "infra", SectionName: "https"}}, Hostnames: []string{"m.example.test"}},
			routes: both(parent("infra", "public", "https", accepted)),
			want:   []servingv1alpha1.ExternalEndpoint{{Via: "Gateway infra/public", REST: "https://m.example.test/v1/models/m", GRPC: "m.example.test:443"}}},
		{name: "a hostname no listener of the named one answers for", spec: values.Routes{ParentRefs: []values.ParentRef{{Name: "public", Namespace: "infra", SectionName: "https"}}, Hostnames: []string{"m.other.test"}},
			routes: both(parent("infra", "public", "https", accepted))},
		{name: "the entry of another listener of the Gateway", spec: values.Routes{ParentRefs: []values.ParentRef{{Name: "public", Namespace: "infra", SectionName: "https"}}},
			routes: both(parent("infra", "public", "http", accepted)), pending: true},
		{name: "the wildcard's own domain is not under it", spec: values.Routes{ParentRefs: []values.ParentRef{{Name: "public", Namespace: "infra", SectionName: "https"}}, Hostnames: []string{"example.test"}},
			routes: both(parent("infra", "public", "https", accepted))},
		{name: "one Gateway refuses, the other accepts", spec: values.Routes{ParentRefs: refs},
			routes: []Route{{Kind: "HTTPRoute", Name: "m", Parents: []RouteParent{
				parent("infra", "public", "", cond("Accepted", metav1.ConditionFalse, "NotAllowedByListeners", "no listener allows routes from namespace ml")),
				parent("ml", "internal", "", accepted),
			}}},
			want:     []servingv1alpha1.ExternalEndpoint{{Via: "Gateway ml/internal", REST: "http://198.18.0.31:8080/v1/models/m"}},
			problems: []string{"HTTPRoute m: Gateway infra/public did not accept it (NotAllowedByListeners): no listener allows routes from namespace ml"}},
		{name: "accepted, but its backend is not resolved", spec: values.Routes{ParentRefs: refs[1:]},
			routes: []Route{{Kind: "GRPCRoute", Name: "m", Parents: []RouteParent{
				parent("ml", "internal", "", accepted, cond("ResolvedRefs", metav1.ConditionFalse, "BackendNotFound", "service m not found")),
			}}},
			problems: []string{"GRPCRoute m: Gateway ml/internal cannot send its traffic to the Service (BackendNotFound): service m not found"}},
		{name: "a Gateway's entry without a verdict yet", spec: values.Routes{ParentRefs: refs[1:]},
			routes:  both(parent("ml", "internal", "", cond("Accepted", metav1.ConditionUnknown, "Pending", ""))),
			pending: true},
		{name: "an accepted route whose Gateway could not be read gives no address", spec: values.Routes{ParentRefs: refs[1:]},
			routes: both(parent("ml", "internal", "", accepted)), gatewayed: map[string]*Gateway{}},
		{name: "a Gateway that does not exist", spec: values.Routes{ParentRefs: refs},
			routes: both(parent("ml", "internal", "", accepted)), gatewayed: map[string]*Gateway{"infra/public": nil, "ml/internal": internal},
			want:     []servingv1alpha1.ExternalEndpoint{{Via: "Gateway ml/internal", REST: "http://198.18.0.31:8080/v1/models/m", GRPC: "198.18.0.31:8080"}},
			problems: []string{"spec.gateway.parentRefs[0]: Gateway infra/public does not exist; nothing routes through it"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gws
			if tc.gatewayed != nil {
				g = tc.gatewayed
			}
			got := FromGateways(&tc.spec, "ml", tc.routes, g, nil, "m")
			if !slices.Equal(got.Endpoints, tc.want) || !slices.Equal(got.Problems, tc.problems) || got.Pending != tc.pending {
				t.Errorf("FromGateways = %+v\nwant endpoints %+v, problems %q, pending %v", got, tc.want, tc.problems, tc.pending)
			}
		})
	}
}

// TestGRPCOverTLSGoesThroughAGatewayThatTookUpItsBackendTLSPolicy: where
// the gRPC port serves TLS, a Gateway that accepted the GRPCRoute carries
// gRPC once it has accepted the BackendTLSPolicy too; the REST API needs
// no policy.
func TestGRPCOverTLSGoesThroughAGatewayThatTookUpItsBackendTLSPolicy(t *testing.T) {
	internal := &Gateway{Namespace: "ml", Name: "internal", Listeners: []Listener{{Name: "web", Protocol: "HTTP", Port: 8080}}, Addresses: []string{"198.18.0.31"}}
	gws := map[string]*Gateway{"ml/internal": internal}
	spec := values.Routes{ParentRefs: []values.ParentRef{{Name: "internal"}}}
	routes := []Route{{Kind: "HTTPRoute", Name: "m", Parents: []RouteParent{parent("ml", "internal", "", accepted)}},
		{Kind: "GRPCRoute", Name: "m", Parents: []RouteParent{parent("ml", "internal", "", accepted)}}}
	rest := servingv1alpha1.ExternalEndpoint{Via: "Gateway ml/internal", REST: "http://198.18.0.31:8080/v1/models/m"}
	both := rest
	both.GRPC = "198.18.0.31:8080"
	for _, tc := range []struct {
		name     string
		policy   *Policy
		want     servingv1alpha1.ExternalEndpoint
		problems []string
		pending  bool
	}{
		{name: "not taken up yet", policy: &Policy{Name: "m"}, want: rest, pending: true},
		{name: "taken up by another Gateway", policy: &Policy{Name: "m", Ancestors: []RouteParent{parent("infra", "internal", "", accepted)}}, want: rest, pending: true},
		{name: "accepted", policy: &Policy{Name: "m", Ancestors: []RouteParent{parent("ml", "internal", "", accepted)}}, want: both},
		{name: "an older policy of the user's own takes precedence", policy: &Policy{Name: "m", Ancestors: []RouteParent{
			parent("ml", "internal", "", cond("Accepted", metav1.ConditionFalse, "Conflicted", "another policy targets the port"))}}, want: both},
		{name: "refused", policy: &Policy{Name: "m", Ancestors: []RouteParent{
			parent("ml", "internal", "", cond("Accepted", metav1.ConditionFalse, "NoValidCACertificate", "no valid CA certificate"))}}, want: rest,
			problems: []string{"BackendTLSPolicy m: Gateway ml/internal did not accept it (NoValidCACertificate): no valid CA certificate; its gRPC calls to the TLS port fail"}},
		{name: "its CA unread", policy: &Policy{Name: "m", Ancestors: []RouteParent{
			parent("ml", "internal", "", accepted, cond("ResolvedRefs", metav1.ConditionFalse, "InvalidCACertificateRef", "configmap m-backend-tls-ca not found"))}}, want: rest,
			problems: []string{"BackendTLSPolicy m: Gateway ml/internal cannot read its CA certificates (InvalidCACertificateRef): configmap m-backend-tls-ca not found"}},
		{name: "no policy needed", want: both},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := FromGateways(&spec, "ml", routes, gws, tc.policy, "m")
			if !slices.Equal(got.Endpoints, []servingv1alpha1.ExternalEndpoint{tc.want}) || !slices.Equal(got.Problems, tc.problems) || got.Pending != tc.pending {
				t.Errorf("FromGateways = %+v\nwant %+v, problems %q, pending %v", got, tc.want, tc.problems, tc.pending)
			}
		})
	}
}

func TestRoutesAndGatewaysAreReadFromTheirJSON(t *testing.T) {
	route := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
		"metadata": map[string]any{"name": "m", "namespace": "ml"},
		"spec":     map[string]any{"rules": []any{map[string]any{"timeouts": map[string]any{"request": "1m30s"}}}},
		"status": map[string]any{"parents": []any{map[string]any{
			"controllerName": "example.test/gateway",
			"parentRef":      map[string]any{"name": "internal", "sectionName": "web"},
			"conditions": []any{map[string]any{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
				"lastTransitionTime": "2026-12-07T15:00:00Z"}},
		}}},
	}}
	r, err := RouteOf(route)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Parents) != 1 || r.Parents[0].Namespace != "ml" || r.Parents[0].SectionName != "web" || r.Parents[0].Conditions[0].Status != metav1.ConditionTrue ||
		r.RequestTimeout != "1m30s" {
		t.Errorf("RouteOf = %+v", r)
	}
	gw := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"name": "internal", "namespace": "ml"},
		"spec": map[string]any{"gatewayClassName": "x", "listeners": []any{
			map[string]any{"name": "web", "protocol": "HTTP", "port": int64(8080), "hostname": "m.example.test"}}},
		"status": map[string]any{"addresses": []any{
			map[string]any{"type": "NamedAddress", "value": "pool-a"},
			map[string]any{"value": "198.18.0.31"}}},
	}}
	g, err := GatewayOf(gw)
	if err != nil {
		t.Fatal(err)
	}
	want := Listener{Name: "web", Hostname: "m.example.test", Protocol: "HTTP", Port: 8080}
	if len(g.Listeners) != 1 || g.Listeners[0] != want || !slices.Equal(g.Addresses, []string{"198.18.0.31"}) {
		t.Errorf("GatewayOf = %+v", g)
	}
	policy := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "BackendTLSPolicy",
		"metadata": map[string]any{"name": "m", "namespace": "ml"},
		"status": map[string]any{"ancestors": []any{
			map[string]any{"controllerName": "example.test/gateway",
				"ancestorRef": map[string]any{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "internal"},
				"conditions": []any{map[string]any{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
					"lastTransitionTime": "2026-12-07T15:00:00Z"}}},
			// An implementation that names the route it came by: not a
			// Gateway's verdict.
			map[string]any{"controllerName": "example.test/mesh",
				"ancestorRef": map[string]any{"group": "gateway.networking.k8s.io", "kind": "GRPCRoute", "name": "m"},
				"conditions":  []any{}},
		}},
	}}
	p, err := PolicyOf(policy)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "m" || len(p.Ancestors) != 1 || GatewayKey(p.Ancestors[0].Namespace, p.Ancestors[0].Name) != "ml/internal" || p.Ancestors[0].Conditions[0].Status != metav1.ConditionTrue {
		t.Errorf("PolicyOf = %+v", p)
	}
}

// A request timeout the cluster's Gateway API dropped (it has no
// timeouts before v1.2, and the apiserver prunes them without an error)
// is said: the Gateways' default holds, not the spec's.
func TestARequestTimeoutTheAPIDroppedIsSaid(t *testing.T) {
	spec := values.Routes{ParentRefs: []values.ParentRef{{Name: "gw"}}, HTTP: true, GRPC: true, RequestTimeout: "1m30s"}
	for _, tc := range []struct {
		name   string
		spec   values.Routes
		routes []Route
		want   []string
	}{
		{"kept", spec, []Route{{Kind: "HTTPRoute", Name: "m", RequestTimeout: "1m30s"}, {Kind: "GRPCRoute", Name: "m"}}, nil},
		{"dropped", spec, []Route{{Kind: "HTTPRoute", Name: "m"}, {Kind: "GRPCRoute", Name: "m"}},
			[]string{"spec.gateway.requestTimeout: HTTPRoute m has no timeouts: the cluster's Gateway API lacks them (they came in v1.2), and the apiserver dropped 1m30s; the Gateways' own default holds"}},
		{"none asked for", values.Routes{ParentRefs: spec.ParentRefs, HTTP: true}, []Route{{Kind: "HTTPRoute", Name: "m"}}, nil},
		{"the route not made yet", spec, nil, nil},
	} {
		got := FromGateways(&tc.spec, "ml", tc.routes, map[string]*Gateway{}, nil, "m").Dropped
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
