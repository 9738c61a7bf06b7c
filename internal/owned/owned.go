// Package owned declares, once, the kinds of object a ModelServer's release
// is made of. The controller's watches, the operator's cache and the drift
// check are derived from this table, and a test holds the RBAC markers to
// it.
package owned

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// Kind is one kind of object the chart renders and the operator watches.
type Kind struct {
	// Name is the kind, as messages name it.
	Name string
	// Group and Resource are what RBAC grants on.
	Group, Resource string
	// New returns an empty object of the kind.
	New func() client.Object
	// Changed lets through the updates that matter to a ModelServer; the
	// rest (status noise) wakes nothing. Nil lets every update through.
	Changed predicate.Predicate
	// Rendered names the objects of the kind that the values render, for
	// the drift check.
	Rendered func(*values.Values) []string
}

// Kinds are the owned kinds. The optional kinds rendered only where their
// API exists (Gateway API routes and BackendTLSPolicy, ServiceMonitor) are
// not watched: the operator must start without them.
var Kinds = []Kind{
	{Name: "ConfigMap", Group: "", Resource: "configmaps",
		New: func() client.Object { return &corev1.ConfigMap{} },
		Rendered: func(v *values.Values) []string {
			if v.BackendTLS != nil && v.BackendTLS.CAConfigMap != "" {
				return []string{v.Names.ConfigMap, v.BackendTLS.CAConfigMap}
			}
			return []string{v.Names.ConfigMap}
		}},
	{Name: "Deployment", Group: "apps", Resource: "deployments",
		New:      func() client.Object { return &appsv1.Deployment{} },
		Changed:  predicate.Funcs{UpdateFunc: deploymentChanged},
		Rendered: func(v *values.Values) []string { return []string{v.Names.Deployment} }},
	{Name: "HorizontalPodAutoscaler", Group: "autoscaling", Resource: "horizontalpodautoscalers",
		New:      func() client.Object { return &autoscalingv2.HorizontalPodAutoscaler{} },
		Changed:  predicate.Funcs{UpdateFunc: autoscalerChanged},
		Rendered: func(v *values.Values) []string { return when(v.Autoscaling != nil, v.Names.Deployment) }},
	{Name: "Ingress", Group: "networking.k8s.io", Resource: "ingresses",
		New: func() client.Object { return &networkingv1.Ingress{} },
		// Its address is the model's URL from outside
		// (status.endpoints.external).
		Changed:  predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.Funcs{UpdateFunc: ingressAddressChanged}),
		Rendered: func(v *values.Values) []string { return when(v.Ingress != nil, v.Names.Deployment) }},
	{Name: "Job", Group: "batch", Resource: "jobs",
		New:     func() client.Object { return &batchv1.Job{} },
		Changed: predicate.Funcs{UpdateFunc: jobChanged},
		Rendered: func(v *values.Values) []string {
			var jobs []string
			for _, f := range v.Fetches {
				jobs = append(jobs, f.Name)
			}
			return jobs
		}},
	{Name: "NetworkPolicy", Group: "networking.k8s.io", Resource: "networkpolicies",
		New: func() client.Object { return &networkingv1.NetworkPolicy{} },
		// Their status says nothing the ModelServer reports; a change of
		// spec or a deletion is what matters. So for the kinds below.
		Changed:  predicate.GenerationChangedPredicate{},
		Rendered: func(v *values.Values) []string { return when(v.NetworkPolicy != nil, v.Names.Deployment) }},
	{Name: "PersistentVolumeClaim", Group: "", Resource: "persistentvolumeclaims",
		New:      func() client.Object { return &corev1.PersistentVolumeClaim{} },
		Changed:  predicate.Funcs{UpdateFunc: claimChanged},
		Rendered: func(v *values.Values) []string { return when(v.Volume.Create, v.Volume.ClaimName) }},
	{Name: "PodDisruptionBudget", Group: "policy", Resource: "poddisruptionbudgets",
		New:      func() client.Object { return &policyv1.PodDisruptionBudget{} },
		Changed:  predicate.GenerationChangedPredicate{},
		Rendered: func(v *values.Values) []string { return when(v.Disruption != nil, v.Names.Deployment) }},
	{Name: "Service", Group: "", Resource: "services",
		New:      func() client.Object { return &corev1.Service{} },
		Rendered: func(v *values.Values) []string { return []string{v.Names.Service} }},
}

func when(rendered bool, name string) []string {
	if !rendered {
		return nil
	}
	return []string{name}
}

// Key identifies one object of a release.
type Key struct {
	Kind *Kind
	Name string
}

func (k Key) String() string { return k.Kind.Name + " " + k.Name }

// Rendered lists the objects the values render, of every owned kind, in
// the order of Kinds and then by name.
func Rendered(v *values.Values) []Key {
	var keys []Key
	for i := range Kinds {
		names := Kinds[i].Rendered(v)
		slices.Sort(names)
		for _, n := range names {
			keys = append(keys, Key{Kind: &Kinds[i], Name: n})
		}
	}
	return keys
}
