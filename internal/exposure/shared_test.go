package exposure

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

func routed(ns, name string, g servingv1alpha1.GatewaySpec, models ...string) Claim {
	ms := &servingv1alpha1.ModelServer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	ms.Spec.Gateway = &g
	for _, m := range models {
		ms.Spec.Models = append(ms.Spec.Models, servingv1alpha1.ModelSpec{Name: m})
	}
	if len(models) == 0 {
		ms.Spec.Model = &servingv1alpha1.ModelSpec{}
	}
	c, _ := ClaimOf(ms)
	return c
}

func TestRoutesThatTakeTheSameRequestsAreNamed(t *testing.T) {
	public := []servingv1alpha1.GatewayParentRef{{Name: "public", Namespace: "infra"}}
	on := func(hosts ...string) servingv1alpha1.GatewaySpec {
		return servingv1alpha1.GatewaySpec{ParentRefs: public, Hostnames: hosts}
	}
	restOnly := func(hosts ...string) servingv1alpha1.GatewaySpec {
		g := on(hosts...)
		g.GRPC = ptr.To(false)
		return g
	}
	own := routed("ml", "resnet", on("models.example.com"))
	for _, tc := range []struct {
		name  string
		own   Claim
		other Claim
		want  []string // parts of each problem, in order
	}{
		{name: "gRPC on the same hostname", own: own, other: routed("team", "mnist", on("models.example.com")),
			want: []string{"ModelServer team/mnist routes gRPC through Gateway infra/public for hostname models.example.com too"}},
		{name: "gRPC under a wildcard", own: own, other: routed("team", "mnist", on("*.example.com")),
			want: []string{"for hostname models.example.com too"}},
		{name: "gRPC over a wildcard", own: routed("ml", "resnet", on("*.example.com")), other: routed("team", "mnist", on("models.example.com")),
			want: []string{"for hostname models.example.com too"}},
		{name: "gRPC on any hostname", own: routed("ml", "resnet", on()), other: routed("team", "mnist", on()),
			want: []string{"for any hostname too"}},
		{name: "another hostname", own: own, other: routed("team", "mnist", on("other.example.com"))},
		{name: "the wildcard's own domain is not under it", own: routed("ml", "resnet", on("example.com")), other: routed("team", "mnist", on("*.example.com"))},
		{name: "another Gateway", own: own, other: routed("team", "mnist", servingv1alpha1.GatewaySpec{ParentRefs: []servingv1alpha1.GatewayParentRef{{Name: "public"}}, Hostnames: []string{"models.example.com"}})},
		{name: "other listeners of the Gateway", own: routed("ml", "resnet", servingv1alpha1.GatewaySpec{ParentRefs: []servingv1alpha1.GatewayParentRef{{Name: "public", Namespace: "infra", SectionName: "a"}}}),
			other: routed("team", "mnist", servingv1alpha1.GatewaySpec{ParentRefs: []servingv1alpha1.GatewayParentRef{{Name: "public", Namespace: "infra", SectionName: "b"}}})},
		{name: "a listener of the Gateway, and all of them", own: own,
			other: routed("team", "mnist", servingv1alpha1.GatewaySpec{ParentRefs: []servingv1alpha1.GatewayParentRef{{Name: "public", Namespace: "infra", SectionName: "https"}}}),
			want:  []string{"routes gRPC through Gateway infra/public for hostname models.example.com too"}},
		{name: "REST of other models shares a hostname", own: routed("ml", "resnet", restOnly("models.example.com")), other: routed("team", "mnist", restOnly("models.example.com"))},
		{name: "REST of a model of the same name", own: routed("ml", "zoo", restOnly("models.example.com"), "bert", "resnet"), other: routed("team", "resnet", restOnly("models.example.com")),
			want: []string{`ModelServer team/resnet routes the REST API of model "resnet" through Gateway infra/public for hostname models.example.com too`}},
		{name: "gRPC of one alone", own: own, other: routed("team", "mnist", restOnly("models.example.com"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Shared(tc.own, []Claim{tc.other})
			ok := len(got) == len(tc.want)
			for i := 0; ok && i < len(got); i++ {
				ok = strings.Contains(got[i], tc.want[i])
			}
			if !ok {
				t.Errorf("Shared = %q, want problems with %q", got, tc.want)
			}
		})
	}
	if got := Shared(own, []Claim{routed("ml", "resnet", on("models.example.com"))}); len(got) != 2 || !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, `model "resnet"`) }) {
		t.Errorf("Shared with a twin = %q, want gRPC and the model named", got)
	}
}

// BenchmarkSharedAmongAThousand is the walk a reconcile of a ModelServer
// with spec.gateway makes of the cache: 1,000 others on the same Gateway,
// each on a hostname of its own.
func BenchmarkSharedAmongAThousand(b *testing.B) {
	others := make([]*servingv1alpha1.ModelServer, 1000)
	for i := range others {
		ms := &servingv1alpha1.ModelServer{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: fmt.Sprintf("m%04d", i)}}
		ms.Spec.Model = &servingv1alpha1.ModelSpec{}
		ms.Spec.Gateway = &servingv1alpha1.GatewaySpec{ParentRefs: []servingv1alpha1.GatewayParentRef{{Name: "public", Namespace: "infra"}},
			Hostnames: []string{fmt.Sprintf("m%04d.example.com", i)}}
		others[i] = ms
	}
	own, _ := ClaimOf(others[0])
	b.ReportAllocs()
	for b.Loop() {
		claims := make([]Claim, 0, len(others))
		for _, o := range others[1:] {
			if c, ok := ClaimOf(o); ok {
				claims = append(claims, c)
			}
		}
		if p := Shared(own, claims); len(p) != 0 {
			b.Fatal(p)
		}
	}
}
