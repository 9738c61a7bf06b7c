package values

import (
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// exposure fills in the Ingress, routes and network policy.
func exposure(ms *servingv1alpha1.ModelServer, v *Values, in Inputs) {
	spec := ms.Spec
	if i := spec.Ingress; i != nil {
		v.Ingress = &Ingress{Host: i.Host, Path: RESTAPIPath, ClassName: i.ClassName, TLSSecretName: i.TLSSecretName, Annotations: i.Annotations}
	}
	if g := spec.Gateway; g != nil {
		r := &Routes{Hostnames: g.Hostnames, HTTP: g.REST == nil || *g.REST, HTTPPath: RESTAPIPath, GRPC: g.GRPC == nil || *g.GRPC}
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
	}
	if np := spec.NetworkPolicy; np != nil {
		ns := append([]string{ms.Namespace}, np.AllowedNamespaces...)
		slices.Sort(ns)
		v.NetworkPolicy = &NetworkPolicy{Namespaces: slices.Compact(ns)}
	}
}
