package artifacts

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
)

// scope says whether a resource lives in a namespace.
type scope int

const (
	namespaced scope = iota + 1
	clusterWide
)

// resourceScopes holds the scope of the built-in resources a role of the
// operator may name, keyed "group/resource" (core: "/resource"). A resource
// that is neither here nor in a CRD of the bundle is refused, so that a new
// rule cannot land in the wrong place of the CSV: add it here, with its
// scope, when a role starts to use it.
var resourceScopes = map[string]scope{
	"/configmaps":                          namespaced,
	"/endpoints":                           namespaced,
	"/events":                              namespaced,
	"/persistentvolumeclaims":              namespaced,
	"/pods":                                namespaced,
	"/pods/log":                            namespaced,
	"/secrets":                             namespaced,
	"/serviceaccounts":                     namespaced,
	"/services":                            namespaced,
	"apps/daemonsets":                      namespaced,
	"apps/deployments":                     namespaced,
	"apps/replicasets":                     namespaced,
	"apps/statefulsets":                    namespaced,
	"autoscaling/horizontalpodautoscalers": namespaced,
	"batch/cronjobs":                       namespaced,
	"batch/jobs":                           namespaced,
	"coordination.k8s.io/leases":           namespaced,
	"discovery.k8s.io/endpointslices":      namespaced,
	"events.k8s.io/events":                 namespaced,
	"gateway.networking.k8s.io/backendtlspolicies":                 namespaced,
	"gateway.networking.k8s.io/gateways":                           namespaced,
	"gateway.networking.k8s.io/grpcroutes":                         namespaced,
	"gateway.networking.k8s.io/httproutes":                         namespaced,
	"monitoring.coreos.com/servicemonitors":                        namespaced,
	"networking.k8s.io/ingresses":                                  namespaced,
	"networking.k8s.io/networkpolicies":                            namespaced,
	"policy/poddisruptionbudgets":                                  namespaced,
	"rbac.authorization.k8s.io/rolebindings":                       namespaced,
	"rbac.authorization.k8s.io/roles":                              namespaced,
	"/namespaces":                                                  clusterWide,
	"/nodes":                                                       clusterWide,
	"/persistentvolumes":                                           clusterWide,
	"admissionregistration.k8s.io/mutatingwebhookconfigurations":   clusterWide,
	"admissionregistration.k8s.io/validatingwebhookconfigurations": clusterWide,
	"apiextensions.k8s.io/customresourcedefinitions":               clusterWide,
	"authentication.k8s.io/tokenreviews":                           clusterWide,
	"authorization.k8s.io/selfsubjectaccessreviews":                clusterWide,
	"authorization.k8s.io/subjectaccessreviews":                    clusterWide,
	"networking.k8s.io/ingressclasses":                             clusterWide,
	"rbac.authorization.k8s.io/clusterrolebindings":                clusterWide,
	"rbac.authorization.k8s.io/clusterroles":                       clusterWide,
	"scheduling.k8s.io/priorityclasses":                            clusterWide,
	"storage.k8s.io/storageclasses":                                clusterWide,
}

// scopes tells the scope of a resource: from the bundle's CRDs, else from
// resourceScopes. A subresource (modelservers/status) has the scope of its
// resource unless it is listed on its own.
type scopes struct {
	crds map[string]scope // "group/plural"
}

func (s scopes) of(group, resource string) (scope, error) {
	key := group + "/" + resource
	if sc, ok := resourceScopes[key]; ok {
		return sc, nil
	}
	base, _, _ := strings.Cut(resource, "/")
	if sc, ok := s.crds[group+"/"+base]; ok {
		return sc, nil
	}
	if sc, ok := resourceScopes[group+"/"+base]; ok {
		return sc, nil
	}
	return 0, fmt.Errorf("the scope of resource %q of API group %q is unknown: add it to resourceScopes in hack/olm/artifacts/rbac.go", resource, group)
}

// checkLeastPrivilege refuses wildcards: every rule must name its API
// groups, resources (or URLs) and verbs.
func checkLeastPrivilege(role string, rules []rbacv1.PolicyRule) error {
	for i, r := range rules {
		for _, list := range [][]string{r.APIGroups, r.Resources, r.Verbs, r.NonResourceURLs} {
			if slices.Contains(list, rbacv1.VerbAll) || slices.Contains(list, rbacv1.ResourceAll) {
				return fmt.Errorf("%s rule %d uses a wildcard: name the groups, resources and verbs it needs", role, i)
			}
		}
		if len(r.Verbs) == 0 || (len(r.Resources) == 0 && len(r.NonResourceURLs) == 0) {
			return fmt.Errorf("%s rule %d names no verbs or no resources", role, i)
		}
	}
	return nil
}

// splitByScope parts the rules of a ClusterRole into those on namespaced
// resources, which OLM grants only in the namespaces the operator watches
// (the CSV's permissions), and those that must be cluster-wide (its
// clusterPermissions): cluster-scoped resources and non-resource URLs. A rule
// that mixes both is cut in two per API group.
func (s scopes) splitByScope(rules []rbacv1.PolicyRule) (ns, cluster []rbacv1.PolicyRule, err error) {
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 {
			cluster = append(cluster, r)
			continue
		}
		var kinds []scope
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				sc, err := s.of(g, res)
				if err != nil {
					return nil, nil, err
				}
				kinds = append(kinds, sc)
			}
		}
		switch {
		case !slices.Contains(kinds, clusterWide):
			ns = append(ns, r)
		case !slices.Contains(kinds, namespaced):
			cluster = append(cluster, r)
		default:
			for _, g := range r.APIGroups {
				var nsRes, clRes []string
				for _, res := range r.Resources {
					if sc, _ := s.of(g, res); sc == namespaced {
						nsRes = append(nsRes, res)
					} else {
						clRes = append(clRes, res)
					}
				}
				if len(nsRes) > 0 {
					ns = append(ns, withGroupResources(r, g, nsRes))
				}
				if len(clRes) > 0 {
					cluster = append(cluster, withGroupResources(r, g, clRes))
				}
			}
		}
	}
	return ns, cluster, nil
}

func withGroupResources(r rbacv1.PolicyRule, group string, resources []string) rbacv1.PolicyRule {
	out := *r.DeepCopy()
	out.APIGroups = []string{group}
	out.Resources = resources
	return out
}

// appendUnique appends the rules not already in list.
func appendUnique(list []rbacv1.PolicyRule, rules ...rbacv1.PolicyRule) []rbacv1.PolicyRule {
	for _, r := range rules {
		if !slices.ContainsFunc(list, func(x rbacv1.PolicyRule) bool { return reflect.DeepEqual(x, r) }) {
			list = append(list, r)
		}
	}
	return list
}
