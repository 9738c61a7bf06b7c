package values

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/names"
)

// exposure fills in the Ingress, routes and network policy.
func exposure(ms *servingv1alpha1.ModelServer, v *Values, in Inputs) {
	spec := ms.Spec
	if i := spec.Ingress; i != nil {
		v.Ingress = &Ingress{Host: i.Host, Path: RESTAPIPath, ClassName: i.ClassName, TLSSecretName: i.TLSSecretName, Annotations: i.Annotations}
	}
	if g := spec.Gateway; g != nil {
		r := &Routes{Hostnames: g.Hostnames, HTTP: RoutesREST(g), HTTPMatches: modelMatches(v.Models), GRPC: RoutesGRPC(g)}
		if t := g.RequestTimeout; t != nil {
			r.RequestTimeout = gatewayDuration(t.Duration)
		}
		for _, route := range []struct {
			on   *bool
			kind schema.GroupVersionKind
		}{{&r.HTTP, HTTPRouteKind}, {&r.GRPC, GRPCRouteKind}} {
			if *route.on && !in.has(route.kind) {
				*route.on = false
				v.Warnings = append(v.Warnings, "spec.gateway: the cluster has no "+APIKey(route.kind)+" API (install the Gateway API); no "+route.kind.Kind+" rendered")
				v.WaitsForAPIs = true
			}
		}
		for _, p := range g.ParentRefs {
			r.ParentRefs = append(r.ParentRefs, ParentRef{Name: p.Name, Namespace: p.Namespace, SectionName: p.SectionName})
		}
		if r.HTTP || r.GRPC {
			v.Routes = r
		}
		if r.GRPC && spec.TLS != nil {
			backendTLS(ms.Name, v, in)
		}
	}
	if np := spec.NetworkPolicy; np != nil {
		ns := append([]string{ms.Namespace}, np.AllowedNamespaces...)
		slices.Sort(ns)
		v.NetworkPolicy = &NetworkPolicy{Namespaces: slices.Compact(ns)}
	}
}

// restVerbs are the methods of TF Serving's REST API, each a path of its
// own: /v1/models/<name>:predict, or .../versions/<n>:predict.
var restVerbs = []string{"predict", "classify", "regress"}

// modelMatches are the paths of the REST API of the models: the model's
// path and those under it (status, metadata, versions and labels), and
// its methods. The Gateway API matches a prefix by whole path segments,
// so /v1/models/m covers /v1/models/m/versions/2:predict but neither
// /v1/models/m:predict nor /v1/models/mnist: a hostname can then serve
// several ModelServers, each its models, where routing /v1 would send
// every model's requests to whichever route is oldest. 16 models make 64
// matches, the most a rule takes.
func modelMatches(models []Model) []PathMatch {
	var matches []PathMatch
	for _, m := range models {
		p := ModelPath(m.Name)
		matches = append(matches, PathMatch{Type: "PathPrefix", Value: p})
		for _, verb := range restVerbs {
			matches = append(matches, PathMatch{Type: "Exact", Value: p + ":" + verb})
		}
	}
	return matches
}

// RoutesREST says that spec.gateway g asks for an HTTPRoute.
func RoutesREST(g *servingv1alpha1.GatewaySpec) bool { return g != nil && (g.REST == nil || *g.REST) }

// RoutesGRPC says that spec.gateway g asks for a GRPCRoute.
func RoutesGRPC(g *servingv1alpha1.GatewaySpec) bool { return g != nil && (g.GRPC == nil || *g.GRPC) }

// backendTLS has the Gateways that carry gRPC speak TLS to the gRPC port,
// which serves nothing else (spec.tls): without a BackendTLSPolicy they
// speak plain HTTP/2 to it, and every call through them fails.
func backendTLS(ms string, v *Values, in Inputs) {
	switch trust := in.GatewayTrust; {
	case !in.has(BackendTLSPolicyKind):
		v.Warnings = append(v.Warnings, "spec.gateway: the cluster has no "+APIKey(BackendTLSPolicyKind)+" API (Gateway API v1.4 or later); no BackendTLSPolicy rendered, and the Gateways speak plain HTTP/2 to the gRPC port, which serves TLS (spec.tls), unless a policy of your own tells them")
		v.WaitsForAPIs = true
	case trust == nil:
	case trust.Problem != "":
		v.Warnings = append(v.Warnings, "spec.gateway: no BackendTLSPolicy rendered for the gRPC port, which serves TLS (spec.tls): "+trust.Problem)
	default:
		v.BackendTLS = &BackendTLS{Hostname: trust.Hostname, CA: trust.CA}
		if trust.CA != "" {
			v.BackendTLS.CAConfigMap = names.GatewayCA(ms)
		}
	}
}

// gatewayDuration is d as the Gateway API writes durations (GEP-2257):
// hours, minutes, seconds and milliseconds, each of at most 5 digits,
// not Go's "1.5s", which the API refuses. The spec's own pattern is the
// API's, with no fractions, and keeps d under 100000h; but each of its
// parts may be of 5 digits, 99999s say, which is 27h46m39s here.
func gatewayDuration(d time.Duration) string {
	if d < time.Millisecond {
		return "0s"
	}
	var out strings.Builder
	for _, unit := range []struct {
		size time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}} {
		if n := d / unit.size; n > 0 {
			out.WriteString(strconv.FormatInt(int64(n), 10) + unit.name)
			d -= n * unit.size
		}
	}
	return out.String()
}
