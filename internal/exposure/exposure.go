// Package exposure says where a model is reached from outside the
// cluster, from what the objects that let its traffic in report of
// themselves: an Ingress's address, a LoadBalancer Service's, the
// Gateways that accepted its routes. A way in is listed only once it
// carries traffic; one that cannot is a problem named for the user.
package exposure

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// Ways in, as status.endpoints.external names them.
const (
	viaIngress      = "Ingress"
	viaLoadBalancer = "LoadBalancer"
	viaGateway      = "Gateway "
)

// FromIngress is the way in through the Ingress of spec, once ing, the
// Ingress as it is, has an address: its controller has taken it on. A
// wildcard host names no URL.
func FromIngress(spec *values.Ingress, ing *networkingv1.Ingress, model string) (servingv1alpha1.ExternalEndpoint, bool) {
	if ing == nil || len(ing.Status.LoadBalancer.Ingress) == 0 || strings.HasPrefix(spec.Host, "*") {
		return servingv1alpha1.ExternalEndpoint{}, false
	}
	scheme := "http"
	if spec.TLSSecretName != "" {
		scheme = "https"
	}
	return servingv1alpha1.ExternalEndpoint{Via: viaIngress, REST: scheme + "://" + spec.Host + values.ModelPath(model)}, true
}

// legacyClassAnnotation chooses an Ingress's controller where
// ingressClassName does not; some controllers still read it alone.
const legacyClassAnnotation = "kubernetes.io/ingress.class"

// defaultClassAnnotation marks the IngressClass of Ingresses that name
// none.
const defaultClassAnnotation = "ingressclass.kubernetes.io/is-default-class"

// IngressClassProblem says why no ingress controller will take on the
// Ingress of spec, given the cluster's IngressClasses, or "".
func IngressClassProblem(spec *values.Ingress, classes []networkingv1.IngressClass) string {
	if _, ok := spec.Annotations[legacyClassAnnotation]; ok {
		return ""
	}
	if spec.ClassName != "" {
		if slices.ContainsFunc(classes, func(c networkingv1.IngressClass) bool { return c.Name == spec.ClassName }) {
			return ""
		}
		return fmt.Sprintf("spec.ingress.className: the cluster has no IngressClass %q; no ingress controller will serve the Ingress", spec.ClassName)
	}
	if slices.ContainsFunc(classes, func(c networkingv1.IngressClass) bool { return c.Annotations[defaultClassAnnotation] == "true" }) {
		return ""
	}
	var names []string
	for _, c := range classes {
		names = append(names, c.Name)
	}
	if len(names) == 0 {
		return "spec.ingress: the cluster has no IngressClass, so no ingress controller; the Ingress is served by none"
	}
	return fmt.Sprintf("spec.ingress: no className, and none of the cluster's IngressClasses (%s) is its default; name one in className", strings.Join(names, ", "))
}

// FromLoadBalancer is the way in through svc, a Service of type
// LoadBalancer, once its load balancer has an address.
func FromLoadBalancer(svc *corev1.Service, restPort, grpcPort int32, model string) (servingv1alpha1.ExternalEndpoint, bool) {
	if svc == nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return servingv1alpha1.ExternalEndpoint{}, false
	}
	for _, lb := range svc.Status.LoadBalancer.Ingress {
		host := lb.Hostname
		if lb.IP != "" {
			host = lb.IP
		}
		if host == "" {
			continue
		}
		return servingv1alpha1.ExternalEndpoint{
			Via:  viaLoadBalancer,
			REST: "http://" + net.JoinHostPort(host, strconv.Itoa(int(restPort))) + values.ModelPath(model),
			GRPC: net.JoinHostPort(host, strconv.Itoa(int(grpcPort))),
		}, true
	}
	return servingv1alpha1.ExternalEndpoint{}, false
}
