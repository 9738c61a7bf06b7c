package controllers

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/desired"
	"github.com/modelserver-dev/modelserver-operator/internal/exposure"
	"github.com/modelserver-dev/modelserver-operator/internal/status"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// The Warnings of a way in from outside the cluster that cannot carry the
// model's traffic, or not as the spec says.
const (
	eventIngressClassNotFound = "IngressClassNotFound"
	eventRouteNotAccepted     = "RouteNotAccepted"
	eventRouteShared          = "RouteShared"
	eventRouteFieldDropped    = "RouteFieldDropped"
)

// gatewayKind is the Gateway API's Gateway, read for the listeners and
// addresses of those that accepted the routes.
var gatewayKind = schema.GroupVersionKind{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "Gateway"}

// observeExposure lists in report.Endpoints.External the ways in from
// outside the cluster that carry the model's traffic, and warns of those
// that cannot, and of routes that take another ModelServer's requests.
// The Ingress and the Service are watched, their addresses included, and
// so are the routes, the BackendTLSPolicy and the Gateways once the
// cluster serves their kinds (lateWatches). The IngressClasses are not,
// and are read from the apiserver while the Ingress has no address; so
// are the Gateway API's objects where they cannot be watched. The caller
// looks again after the returned wait where what it waits for wakes
// nothing: a class missing, a route not yet accepted or refused and not
// watched, another ModelServer's route shared (its going away wakes
// none).
func (r *ModelServerReconciler) observeExposure(ctx context.Context, ms *servingv1alpha1.ModelServer, want *desired.State, report *status.Observation) (time.Duration, error) {
	vals := want.Values
	model := vals.Models[0].Name
	var external []servingv1alpha1.ExternalEndpoint
	var classProblem, routeProblems, dropped, shared []string
	var lookAgainIn time.Duration

	if spec := vals.Ingress; spec != nil {
		ing, err := getIfExists(ctx, r, ms.Namespace, vals.Names.Deployment, &networkingv1.Ingress{})
		if err != nil {
			return 0, err
		}
		if ep, ok := exposure.FromIngress(spec, ing, model); ok {
			external = append(external, ep)
		} else if ing == nil || len(ing.Status.LoadBalancer.Ingress) == 0 {
			classes := &networkingv1.IngressClassList{}
			err := r.APIReader.List(ctx, classes)
			if apierrors.IsForbidden(err) {
				// An admin narrowed the operator's role: no check.
				log.FromContext(ctx).Info("cannot list IngressClasses to check the Ingress's", "error", err.Error())
			} else if err != nil {
				return 0, err
			} else if p := exposure.IngressClassProblem(spec, classes.Items); p != "" {
				classProblem = append(classProblem, p)
				// A class made later wakes nothing.
				lookAgainIn = cmp.Or(r.RecheckAfter, time.Minute)
			}
		}
	}

	if spec := vals.Routes; spec != nil {
		routed, watched, err := r.observeRoutes(ctx, ms, spec, vals, model)
		if err != nil {
			return 0, err
		}
		external = append(external, routed.Endpoints...)
		routeProblems, dropped = routed.Problems, routed.Dropped
		if shared, err = r.sharedRoutes(ctx, ms, spec); err != nil {
			return 0, err
		}
		if (routed.Pending || len(routed.Problems) > 0) && !watched || len(shared) > 0 {
			waitSooner(&lookAgainIn, cmp.Or(r.RecheckAfter, time.Minute))
		}
	}

	if vals.Service.Type == corev1.ServiceTypeLoadBalancer {
		svc, err := getIfExists(ctx, r, ms.Namespace, vals.Names.Service, &corev1.Service{})
		if err != nil {
			return 0, err
		}
		if ep, ok := exposure.FromLoadBalancer(svc, vals.Serving.RESTPort, vals.Serving.GRPCPort, model); ok {
			external = append(external, ep)
		}
	}

	report.Endpoints = withExternal(report.Endpoints, &servingv1alpha1.Endpoints{External: external})
	for _, p := range []struct {
		reason, action string
		problems       []string
	}{
		{eventIngressClassNotFound, "FindIngressClass", classProblem},
		{eventRouteNotAccepted, "ReadRouteStatus", routeProblems},
		{eventRouteFieldDropped, "ReadRoute", dropped},
		{eventRouteShared, "CompareRoutes", shared},
	} {
		if len(p.problems) == 0 {
			r.problems.resolved(ms.UID, p.reason)
			continue
		}
		report.Warnings = append(slices.Clone(report.Warnings), p.problems...)
		r.warn(ms, p.reason, p.action, sentence("%s", strings.Join(p.problems, "; ")))
	}
	return lookAgainIn, nil
}

// observeRoutes reads the routes the release made, and the Gateways that
// accepted them, for what they let in (exposure.Routed); watched says
// that a change of any of them wakes the ModelServer.
func (r *ModelServerReconciler) observeRoutes(ctx context.Context, ms *servingv1alpha1.ModelServer, spec *values.Routes, vals *values.Values, model string) (routed exposure.Routed, watched bool, err error) {
	watched = true
	var routes []exposure.Route
	for _, k := range []struct {
		on   bool
		kind schema.GroupVersionKind
	}{{spec.HTTP, values.HTTPRouteKind}, {spec.GRPC, values.GRPCRouteKind}} {
		if !k.on {
			continue
		}
		watched = r.watching(ctx, k.kind) && watched
		u, _, err := r.readOptional(ctx, k.kind, ms.Namespace, vals.Names.Deployment)
		if err != nil {
			return exposure.Routed{}, false, err
		}
		if u == nil {
			continue
		}
		route, err := exposure.RouteOf(u)
		if err != nil {
			return exposure.Routed{}, false, err
		}
		routes = append(routes, route)
	}
	gateways, gatewaysWatched, err := r.readGateways(ctx, spec.ParentRefs, ms.Namespace)
	if err != nil {
		return exposure.Routed{}, false, err
	}
	watched = gatewaysWatched && watched
	var policy *exposure.Policy
	if vals.BackendTLS != nil {
		watched = r.watching(ctx, values.BackendTLSPolicyKind) && watched
		u, _, err := r.readOptional(ctx, values.BackendTLSPolicyKind, ms.Namespace, vals.Names.Deployment)
		switch {
		case err != nil:
			return exposure.Routed{}, false, err
		case u == nil:
			policy = &exposure.Policy{Name: vals.Names.Deployment}
		default:
			if policy, err = exposure.PolicyOf(u); err != nil {
				return exposure.Routed{}, false, err
			}
		}
	}
	routed = exposure.FromGateways(spec, ms.Namespace, routes, gateways, policy, model)
	if len(routes) == 0 {
		routed.Pending = true
	}
	return routed, watched, nil
}

// readGateways reads the Gateways refs name, from a route in namespace,
// by exposure.GatewayKey: nil for one that does not exist, none for one
// that cannot be read. watched says that the cache holds them all.
func (r *ModelServerReconciler) readGateways(ctx context.Context, refs []values.ParentRef, namespace string) (map[string]*exposure.Gateway, bool, error) {
	gateways := map[string]*exposure.Gateway{}
	seen := map[string]bool{}
	watched := true
	for _, ref := range refs {
		key := exposure.ParentKey(ref, namespace)
		if seen[key] {
			continue
		}
		seen[key] = true
		ns, name, _ := strings.Cut(key, "/")
		u, found, held := r.cachedGateway(ctx, types.NamespacedName{Namespace: ns, Name: name})
		missing := held && !found
		if !held {
			watched = false
			var err error
			if u, missing, err = r.readOptional(ctx, gatewayKind, ns, name); err != nil {
				return nil, false, err
			}
		}
		switch {
		case missing:
			gateways[key] = nil
		case u != nil:
			gw, err := exposure.GatewayOf(u)
			if err != nil {
				return nil, false, err
			}
			gateways[key] = gw
		}
	}
	return gateways, watched, nil
}

// sharedRoutes says where the routes of ms (spec, as rendered) take the
// same requests on a Gateway as another ModelServer's (exposure.Shared).
// The other's change wakes ms where they come to share (routeSharers);
// the caller looks again while one is found, to clear it once they no
// longer do.
func (r *ModelServerReconciler) sharedRoutes(ctx context.Context, ms *servingv1alpha1.ModelServer, spec *values.Routes) ([]string, error) {
	own, _ := exposure.ClaimOf(ms)
	own.GRPC = spec.GRPC
	if !spec.HTTP {
		own.Models = nil
	}
	others, err := r.otherClaims(ctx, ms)
	if err != nil {
		return nil, err
	}
	return exposure.Shared(own, others), nil
}

// routeSharers are the ModelServers whose routes take the same requests
// as those of o, a ModelServer just made or changed, so that each says it
// at once. One that no longer shares with o looks again on its own
// (observeExposure) and clears its warning.
func (r *ModelServerReconciler) routeSharers(ctx context.Context, o client.Object) []reconcile.Request {
	ms, ok := o.(*servingv1alpha1.ModelServer)
	if !ok {
		return nil
	}
	claim, ok := exposure.ClaimOf(ms)
	if !ok {
		return nil
	}
	others, err := r.otherClaims(ctx, ms)
	if err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, c := range others {
		if len(exposure.Shared(c, []exposure.Claim{claim})) > 0 {
			reqs = append(reqs, reconcile.Request{NamespacedName: c.ModelServer})
		}
	}
	return reqs
}

// otherClaims are what the routes of the ModelServers besides ms take,
// of those not being deleted (claims).
func (r *ModelServerReconciler) otherClaims(ctx context.Context, ms *servingv1alpha1.ModelServer) ([]exposure.Claim, error) {
	return r.claims(ctx, func(o *servingv1alpha1.ModelServer) bool { return o.UID != ms.UID && o.DeletionTimestamp == nil })
}

// claims are what the routes of the ModelServers the cache holds take
// (walked uncopied), of those keep lets through (nil: all), in the order
// of their names.
func (r *ModelServerReconciler) claims(ctx context.Context, keep func(*servingv1alpha1.ModelServer) bool) ([]exposure.Claim, error) {
	list := &servingv1alpha1.ModelServerList{}
	if err := r.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var out []exposure.Claim
	for i := range list.Items {
		o := &list.Items[i]
		if keep != nil && !keep(o) {
			continue
		}
		if c, ok := exposure.ClaimOf(o); ok {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b exposure.Claim) int { return strings.Compare(a.ModelServer.String(), b.ModelServer.String()) })
	return out, nil
}

// gatewaySpecNews lets through a ModelServer with spec.gateway made, or
// whose spec changed: what its routes take may have.
var gatewaySpecNews = predicate.Funcs{
	CreateFunc:  func(e event.CreateEvent) bool { return hasGateway(e.Object) },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() && hasGateway(e.ObjectNew)
	},
}

func hasGateway(o client.Object) bool {
	ms, ok := o.(*servingv1alpha1.ModelServer)
	return ok && ms.Spec.Gateway != nil
}

// readOptional reads an object of a kind the cluster may lack, or the
// operator may not be let read (a namespaced install, a Gateway of
// another namespace; an admin who narrowed its role): nil where it cannot
// be had, and missing where it does not exist.
func (r *ModelServerReconciler) readOptional(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) (u *unstructured.Unstructured, missing bool, err error) {
	u = &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err = r.APIReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, u)
	switch {
	case err == nil:
		return u, false, nil
	case apierrors.IsNotFound(err):
		return nil, true, nil
	case meta.IsNoMatchError(err), apierrors.IsForbidden(err):
		log.FromContext(ctx).V(1).Info("cannot read the object to list the model's ways in", "kind", gvk.Kind, "namespace", ns, "name", name, "error", err.Error())
		return nil, false, nil
	}
	return nil, false, err
}

// withExternal is eps with the ways in from outside of from.
func withExternal(eps, from *servingv1alpha1.Endpoints) *servingv1alpha1.Endpoints {
	if eps == nil {
		return nil
	}
	out := *eps
	out.External = nil
	if from != nil {
		out.External = from.External
	}
	return &out
}
