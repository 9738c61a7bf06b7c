package exposure

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// Route is what a Gateway API route says of the Gateways it names: each
// that has taken it up writes its own entry in the route's status.
type Route struct {
	Kind, Name string
	Parents    []RouteParent
	// RequestTimeout is an HTTPRoute's timeouts.request, of its first rule
	// (the chart renders one), "" without.
	RequestTimeout string
}

// RouteParent is one Gateway's entry in a route's status.
type RouteParent struct {
	// Namespace (defaulted to the route's), Name and SectionName identify
	// the parent as the route's parentRefs do.
	Namespace, Name, SectionName string
	Conditions                   []metav1.Condition
}

// Gateway is what a route's URL is made of: the Gateway's listeners and
// the addresses it was given.
type Gateway struct {
	Namespace, Name string
	Listeners       []Listener
	Addresses       []string
}

// Listener is one port of a Gateway, with the hostname it answers for
// ("" for any).
type Listener struct {
	Name, Hostname, Protocol string
	Port                     int32
}

// The parts of the Gateway API's objects read here, as their JSON has
// them; the module of its types is not a dependency for so little.
type routeObject struct {
	Spec struct {
		Rules []struct {
			Timeouts struct {
				Request string `json:"request"`
			} `json:"timeouts"`
		} `json:"rules"`
	} `json:"spec"`
	Status struct {
		Parents []struct {
			ParentRef struct {
				Namespace   string `json:"namespace"`
				Name        string `json:"name"`
				SectionName string `json:"sectionName"`
			} `json:"parentRef"`
			Conditions []metav1.Condition `json:"conditions"`
		} `json:"parents"`
	} `json:"status"`
}

type policyObject struct {
	Status struct {
		Ancestors []struct {
			AncestorRef struct {
				Kind      string `json:"kind"`
				Namespace string `json:"namespace"`
				Name      string `json:"name"`
			} `json:"ancestorRef"`
			Conditions []metav1.Condition `json:"conditions"`
		} `json:"ancestors"`
	} `json:"status"`
}

type gatewayObject struct {
	Spec struct {
		Listeners []struct {
			Name     string `json:"name"`
			Hostname string `json:"hostname"`
			Protocol string `json:"protocol"`
			Port     int32  `json:"port"`
		} `json:"listeners"`
	} `json:"spec"`
	Status struct {
		Addresses []struct {
			Type  string `json:"type"`
			Value string `json:"value"`
		} `json:"addresses"`
	} `json:"status"`
}

// RouteOf reads u, an HTTPRoute or a GRPCRoute.
func RouteOf(u *unstructured.Unstructured) (Route, error) {
	var o routeObject
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &o); err != nil {
		return Route{}, fmt.Errorf("read %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	r := Route{Kind: u.GetKind(), Name: u.GetName()}
	if len(o.Spec.Rules) > 0 {
		r.RequestTimeout = o.Spec.Rules[0].Timeouts.Request
	}
	for _, p := range o.Status.Parents {
		r.Parents = append(r.Parents, RouteParent{
			Namespace: cmp.Or(p.ParentRef.Namespace, u.GetNamespace()), Name: p.ParentRef.Name,
			SectionName: p.ParentRef.SectionName, Conditions: p.Conditions,
		})
	}
	return r, nil
}

// Policy is what the Gateways say of a BackendTLSPolicy: each that has
// taken it up writes its own entry (an ancestor) in its status.
type Policy struct {
	Name      string
	Ancestors []RouteParent
}

// PolicyOf reads u, a BackendTLSPolicy.
func PolicyOf(u *unstructured.Unstructured) (*Policy, error) {
	var o policyObject
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &o); err != nil {
		return nil, fmt.Errorf("read BackendTLSPolicy %s: %w", u.GetName(), err)
	}
	p := &Policy{Name: u.GetName()}
	for _, a := range o.Status.Ancestors {
		if a.AncestorRef.Kind == "" || a.AncestorRef.Kind == "Gateway" {
			p.Ancestors = append(p.Ancestors, RouteParent{Namespace: cmp.Or(a.AncestorRef.Namespace, u.GetNamespace()), Name: a.AncestorRef.Name, Conditions: a.Conditions})
		}
	}
	return p, nil
}

// GatewayOf reads u, a Gateway.
func GatewayOf(u *unstructured.Unstructured) (*Gateway, error) {
	var o gatewayObject
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &o); err != nil {
		return nil, fmt.Errorf("read Gateway %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	g := &Gateway{Namespace: u.GetNamespace(), Name: u.GetName()}
	for _, l := range o.Spec.Listeners {
		g.Listeners = append(g.Listeners, Listener{Name: l.Name, Hostname: l.Hostname, Protocol: l.Protocol, Port: l.Port})
	}
	for _, a := range o.Status.Addresses {
		// A NamedAddress is the implementation's own name for an
		// address, not one a client can dial.
		if a.Value != "" && (a.Type == "" || a.Type == "IPAddress" || a.Type == "Hostname") {
			g.Addresses = append(g.Addresses, a.Value)
		}
	}
	return g, nil
}

// GatewayKey names a Gateway as namespace/name.
func GatewayKey(namespace, name string) string { return namespace + "/" + name }

// ParentKey is the Gateway that ref names, from a route in namespace.
func ParentKey(ref values.ParentRef, namespace string) string {
	return GatewayKey(cmp.Or(ref.Namespace, namespace), ref.Name)
}

// Routed is what the routes of spec, in namespace, let in: a way in for
// each Gateway that accepted a route and gave it an address, the
// problems the Gateways report of the routes, and whether a Gateway has
// yet to say anything of one.
type Routed struct {
	Endpoints []servingv1alpha1.ExternalEndpoint
	Problems  []string
	Pending   bool
	// Dropped says what of the spec the routes lack though the release
	// rendered it: a field the cluster's Gateway API does not have, which
	// the apiserver prunes without an error.
	Dropped []string
}

// FromGateways says what the routes let in (Routed). gateways holds the
// Gateways spec names, by GatewayKey: nil for one that does not exist, and
// none for one that could not be read, which gives no address. policy is
// the BackendTLSPolicy gRPC needs to reach the Service through a Gateway,
// nil where it needs none: a Gateway carries gRPC once it accepted both.
func FromGateways(spec *values.Routes, namespace string, routes []Route, gateways map[string]*Gateway, policy *Policy, model string) Routed {
	var out Routed
	for _, r := range routes {
		if r.Kind == values.HTTPRouteKind.Kind && spec.RequestTimeout != "" && r.RequestTimeout == "" {
			out.Dropped = append(out.Dropped, fmt.Sprintf("spec.gateway.requestTimeout: HTTPRoute %s has no timeouts: the cluster's Gateway API lacks them (they came in v1.2), and the apiserver dropped %s; the Gateways' own default holds", r.Name, spec.RequestTimeout))
		}
	}
	for i, ref := range spec.ParentRefs {
		key := ParentKey(ref, namespace)
		if gw, read := gateways[key]; read && gw == nil {
			// Nothing would ever write the routes' status.
			out.Problems = append(out.Problems, fmt.Sprintf("spec.gateway.parentRefs[%d]: Gateway %s does not exist; nothing routes through it", i, key))
			continue
		}
		ep := servingv1alpha1.ExternalEndpoint{Via: viaGateway + key}
		for _, r := range routes {
			accepted, problem := verdict(r, key, ref.SectionName)
			if accepted && r.Kind == values.GRPCRouteKind.Kind && policy != nil {
				accepted, problem = policy.verdict(key)
			}
			switch {
			case problem != "":
				out.Problems = append(out.Problems, problem)
				continue
			case !accepted:
				out.Pending = true
				continue
			}
			scheme, host, port, ok := address(gateways[key], ref.SectionName, spec.Hostnames)
			if !ok {
				continue
			}
			if r.Kind == values.GRPCRouteKind.Kind {
				ep.GRPC = net.JoinHostPort(host, strconv.Itoa(int(port)))
			} else {
				ep.REST = scheme + "://" + urlHost(host, port, scheme) + values.ModelPath(model)
			}
		}
		if (ep.REST != "" || ep.GRPC != "") && !slices.ContainsFunc(out.Endpoints, func(e servingv1alpha1.ExternalEndpoint) bool { return e.Via == ep.Via }) {
			out.Endpoints = append(out.Endpoints, ep)
		}
	}
	return out
}

// verdict is what the Gateway key (its listener section, if named) said
// of route r: that it accepted it, or the problem it has with it; neither
// while it has said nothing yet.
func verdict(r Route, key, section string) (accepted bool, problem string) {
	i := slices.IndexFunc(r.Parents, func(p RouteParent) bool {
		return GatewayKey(p.Namespace, p.Name) == key && p.SectionName == section
	})
	if i < 0 {
		return false, ""
	}
	conds := r.Parents[i].Conditions
	if c := meta.FindStatusCondition(conds, "Accepted"); c != nil && c.Status == metav1.ConditionFalse {
		return false, fmt.Sprintf("%s %s: Gateway %s did not accept it (%s): %s", r.Kind, r.Name, key, c.Reason, c.Message)
	}
	if c := meta.FindStatusCondition(conds, "ResolvedRefs"); c != nil && c.Status == metav1.ConditionFalse {
		return false, fmt.Sprintf("%s %s: Gateway %s cannot send its traffic to the Service (%s): %s", r.Kind, r.Name, key, c.Reason, c.Message)
	}
	return meta.IsStatusConditionTrue(conds, "Accepted"), ""
}

// verdict is what the Gateway key said of the policy: that it speaks TLS
// to the gRPC port as told (or as another policy, older, tells it: the
// Gateway API's Conflicted), or the problem it has with it; neither while
// it has said nothing yet.
func (p *Policy) verdict(key string) (accepted bool, problem string) {
	i := slices.IndexFunc(p.Ancestors, func(a RouteParent) bool { return GatewayKey(a.Namespace, a.Name) == key })
	if i < 0 {
		return false, ""
	}
	conds := p.Ancestors[i].Conditions
	c := meta.FindStatusCondition(conds, "Accepted")
	if c != nil && c.Status == metav1.ConditionFalse && c.Reason != "Conflicted" {
		return false, fmt.Sprintf("BackendTLSPolicy %s: Gateway %s did not accept it (%s): %s; its gRPC calls to the TLS port fail", p.Name, key, c.Reason, c.Message)
	}
	if r := meta.FindStatusCondition(conds, "ResolvedRefs"); r != nil && r.Status == metav1.ConditionFalse {
		return false, fmt.Sprintf("BackendTLSPolicy %s: Gateway %s cannot read its CA certificates (%s): %s", p.Name, key, r.Reason, r.Message)
	}
	return c != nil && (c.Status == metav1.ConditionTrue || c.Reason == "Conflicted"), ""
}

// address is where a client reaches a route through gw's listeners
// (section's alone, if named): the scheme, host and port of the first
// listener, HTTPS before HTTP, for which a host is known. That is the
// first of the route's hostnames the listener answers for; for a route
// with none, the listener's own hostname, or the Gateway's address where
// the listener answers for any.
func address(gw *Gateway, section string, hostnames []string) (scheme, host string, port int32, ok bool) {
	if gw == nil {
		return "", "", 0, false
	}
	var listeners []Listener
	for _, l := range gw.Listeners {
		if (section == "" || l.Name == section) && (l.Protocol == "HTTPS" || l.Protocol == "HTTP") {
			listeners = append(listeners, l)
		}
	}
	slices.SortStableFunc(listeners, func(a, b Listener) int { return strings.Compare(b.Protocol, a.Protocol) })
	for _, l := range listeners {
		host := hostFor(l, hostnames, gw.Addresses)
		if host != "" {
			return strings.ToLower(l.Protocol), host, l.Port, true
		}
	}
	return "", "", 0, false
}

func hostFor(l Listener, hostnames, addresses []string) string {
	if len(hostnames) == 0 {
		switch {
		case l.Hostname != "" && !strings.HasPrefix(l.Hostname, "*"):
			return l.Hostname
		case l.Hostname == "" && len(addresses) > 0:
			return addresses[0]
		}
		return ""
	}
	for _, h := range hostnames {
		if !strings.HasPrefix(h, "*") && answers(l.Hostname, h) {
			return h
		}
	}
	return ""
}

// answers says that a listener of hostname serves requests for host.
func answers(hostname, host string) bool {
	if hostname == "" || hostname == host {
		return true
	}
	// "*.example.com" answers for a.example.com, not for example.com.
	suffix, wild := strings.CutPrefix(hostname, "*")
	return wild && strings.HasSuffix(host, suffix)
}

// urlHost is host as a URL has it: with the port where it is not the
// scheme's own, an IPv6 address in brackets.
func urlHost(host string, port int32, scheme string) string {
	if (scheme == "http" && port == 80) || (scheme == "https" && port == 443) {
		if strings.Contains(host, ":") {
			return "[" + host + "]"
		}
		return host
	}
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}
