package values

import (
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// checkObjectSettings applies the apiserver's rules to what the spec puts
// on the release's objects other than the pods: the Service's and the
// Ingress's annotations, the Ingress's host, the ServiceMonitor's labels
// and the model volume's size, where the operator makes the volume. The
// CRD's schema cannot state them, and Helm creates objects one by one:
// one refused would leave the release half made.
func checkObjectSettings(spec servingv1alpha1.ModelServerSpec, ownVolume bool) error {
	annotations := []keyValues{{"spec.service.annotations", spec.Service.Annotations}}
	if spec.Ingress != nil {
		annotations = append(annotations, keyValues{"spec.ingress.annotations", spec.Ingress.Annotations})
	}
	for _, a := range annotations {
		if errs := apivalidation.ValidateAnnotations(a.kv, field.NewPath(a.field)); len(errs) > 0 {
			return &Error{a.field, firstError(errs)}
		}
	}
	// The schema's pattern for a host name also fits an IPv4 address.
	if i := spec.Ingress; i != nil && netutils.ParseIPSloppy(i.Host) != nil {
		return &Error{"spec.ingress.host", badValue(i.Host, "must be a DNS name, not an IP address")}
	}
	if sm := spec.Monitoring.ServiceMonitor; sm != nil {
		if errs := metav1validation.ValidateLabels(sm.Labels, field.NewPath("spec.monitoring.serviceMonitor.labels")); len(errs) > 0 {
			return &Error{"spec.monitoring.serviceMonitor.labels", firstError(errs)}
		}
	}
	if size := spec.Storage.Size; ownVolume && size != nil && size.Sign() <= 0 {
		return &Error{"spec.storage.size", size.String() + ": must be greater than zero"}
	}
	return nil
}

// keyValues are labels or annotations, and the field they come from.
type keyValues struct {
	field string
	kv    map[string]string
}
