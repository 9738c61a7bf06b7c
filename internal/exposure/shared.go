package exposure

import (
	"cmp"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// Claim is what the routes of one ModelServer take of the Gateways: the
// listeners they attach to, the hostnames they answer for (none: any the
// listener does), the models whose REST API the HTTPRoute routes, and
// whether a GRPCRoute takes the gRPC calls.
type Claim struct {
	ModelServer types.NamespacedName
	Parents     []Parent
	Hostnames   []string
	Models      []string
	GRPC        bool
}

// Parent is a Gateway, by GatewayKey, and its listener, "" for all.
type Parent struct {
	Gateway, Section string
}

// ClaimOf is what the spec.gateway of ms takes, false without one.
func ClaimOf(ms *servingv1alpha1.ModelServer) (Claim, bool) {
	g := ms.Spec.Gateway
	if g == nil {
		return Claim{}, false
	}
	c := Claim{ModelServer: types.NamespacedName{Namespace: ms.Namespace, Name: ms.Name}, Hostnames: g.Hostnames, GRPC: values.RoutesGRPC(g)}
	for _, p := range g.ParentRefs {
		c.Parents = append(c.Parents, Parent{Gateway: GatewayKey(cmp.Or(p.Namespace, ms.Namespace), p.Name), Section: p.SectionName})
	}
	if values.RoutesREST(g) {
		c.Models = values.ModelNames(ms)
	}
	return c, true
}

// Shared says where the routes of own and of others take the same
// requests on a Gateway, which sends them to one ModelServer only (the
// older route's): gRPC on a hostname both answer for, whatever the
// models, since a gRPC call names its model in its message, not its
// path; and the REST API of a model of the same name. One problem per
// other ModelServer and kind, for own's status.
func Shared(own Claim, others []Claim) []string {
	var problems []string
	for _, o := range others {
		gateway, host, ok := overlap(own, o)
		if !ok {
			continue
		}
		if own.GRPC && o.GRPC {
			problems = append(problems, fmt.Sprintf("spec.gateway: ModelServer %s routes gRPC through Gateway %s for %s too; a gRPC call names its model in its message, not its path, so the Gateway sends every call to one of the two (the older route's): give each a hostname of its own, or set grpc: false on one", o.ModelServer, gateway, host))
		}
		for _, m := range own.Models {
			if slices.Contains(o.Models, m) {
				problems = append(problems, fmt.Sprintf("spec.gateway: ModelServer %s routes the REST API of model %q through Gateway %s for %s too; the Gateway sends its requests to one of the two (the older route's)", o.ModelServer, m, gateway, host))
				break
			}
		}
	}
	return problems
}

// overlap is the first Gateway listener and hostname the routes of a and
// b both take: "hostname h", or "any hostname".
func overlap(a, b Claim) (gateway, host string, ok bool) {
	i := slices.IndexFunc(a.Parents, func(p Parent) bool {
		return slices.ContainsFunc(b.Parents, func(q Parent) bool {
			return p.Gateway == q.Gateway && (p.Section == q.Section || p.Section == "" || q.Section == "")
		})
	})
	if i < 0 {
		return "", "", false
	}
	h, ok := sharedHostname(a.Hostnames, b.Hostnames)
	return a.Parents[i].Gateway, h, ok
}

// sharedHostname is a hostname routes of hostnames a and b both answer
// for; no hostnames answer for any.
func sharedHostname(a, b []string) (string, bool) {
	switch {
	case len(a) == 0 && len(b) == 0:
		return "any hostname", true
	case len(a) == 0:
		return "hostname " + b[0], true
	case len(b) == 0:
		return "hostname " + a[0], true
	}
	for _, x := range a {
		for _, y := range b {
			if h, ok := sameHost(x, y); ok {
				return "hostname " + h, true
			}
		}
	}
	return "", false
}

// sameHost is the more precise of hostnames x and y where one answers
// for the other: a wildcard answers for every name under its domain.
func sameHost(x, y string) (string, bool) {
	switch {
	case answers(y, x):
		return x, true
	case answers(x, y):
		return y, true
	}
	return "", false
}
