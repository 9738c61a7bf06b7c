package values

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The rules below are the apiserver's for a pod's container resources and
// tolerations, which the CRD's schema (Kubernetes' own types, without
// their validation) cannot state. A spec that breaks one would get part
// of its release created, and the Deployment refused with a message about
// the Deployment; the operator names the ModelServer's field instead, and
// creates nothing. They are written to refuse only what every apiserver
// refuses: what a feature gate may allow is left for the apiserver to say.

// checkResources applies the apiserver's rules for a container's
// resources to the serving container's.
func checkResources(r corev1.ResourceRequirements) error {
	path := field.NewPath("spec", "resources")
	for _, side := range []struct {
		name string
		list corev1.ResourceList
	}{{"limits", r.Limits}, {"requests", r.Requests}} {
		for _, name := range sortedNames(side.list) {
			f := path.Child(side.name).Key(string(name)).String()
			if problem := containerResourceName(name); problem != "" {
				return &Error{f, problem}
			}
			q := side.list[name]
			if q.Sign() < 0 {
				return &Error{f, fmt.Sprintf("%s: must not be negative", q.String())}
			}
			if extended(name) && q.MilliValue()%1000 != 0 {
				return &Error{f, fmt.Sprintf("%s: must be a whole number: %s is counted in units", q.String(), name)}
			}
		}
	}
	for _, name := range sortedNames(r.Requests) {
		req := r.Requests[name]
		limit, hasLimit := r.Limits[name]
		switch {
		case !overcommittable(name) && !hasLimit:
			return &Error{path.Child("limits").Key(string(name)).String(),
				fmt.Sprintf("must be set, to the request (%s): %s cannot be overcommitted", req.String(), name)}
		case !overcommittable(name) && req.Cmp(limit) != 0:
			return &Error{path.Child("requests").Key(string(name)).String(),
				fmt.Sprintf("%s: must equal the limit, %s: %s cannot be overcommitted", req.String(), limit.String(), name)}
		case hasLimit && req.Cmp(limit) > 0:
			return &Error{path.Child("requests").Key(string(name)).String(),
				fmt.Sprintf("%s: must not exceed the limit, %s", req.String(), limit.String())}
		}
	}
	hugePages, cpuOrMemory := false, false
	for _, list := range []corev1.ResourceList{r.Limits, r.Requests} {
		for name := range list {
			hugePages = hugePages || strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
			cpuOrMemory = cpuOrMemory || name == corev1.ResourceCPU || name == corev1.ResourceMemory
		}
	}
	if hugePages && !cpuOrMemory {
		return &Error{path.String(), "huge pages need a cpu or memory request or limit too"}
	}
	if len(r.Claims) > 0 {
		return &Error{path.Child("claims").String(), "the serving pods declare no resource claims for the container to use"}
	}
	return nil
}

// containerResourceName is what is wrong with name as a container's
// resource, "" if nothing is.
func containerResourceName(name corev1.ResourceName) string {
	const kinds = "a container asks for cpu, memory, ephemeral-storage, hugepages-<size>, or a resource of a domain, such as nvidia.com/gpu"
	if msgs := validation.IsQualifiedName(string(name)); len(msgs) > 0 {
		return fmt.Sprintf("%.100q is not a resource name: %s", name, msgs[0])
	}
	if !strings.Contains(string(name), "/") {
		switch {
		case name == corev1.ResourceCPU, name == corev1.ResourceMemory, name == corev1.ResourceEphemeralStorage,
			strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix):
			return ""
		}
		return fmt.Sprintf("%.100q is not a resource of containers: %s", name, kinds)
	}
	if !native(name) && !extended(name) {
		return fmt.Sprintf("%.100q is not a resource of containers: a domain's resource name must not start with %q, and %q must be a qualified name",
			name, corev1.DefaultResourceRequestsPrefix, corev1.DefaultResourceRequestsPrefix+string(name))
	}
	return ""
}

// native says whether name is Kubernetes' own: unprefixed, or in the
// kubernetes.io domain.
func native(name corev1.ResourceName) bool {
	return !strings.Contains(string(name), "/") || strings.Contains(string(name), corev1.ResourceDefaultNamespacePrefix)
}

// extended says whether name is a resource of another domain, such as a
// device plugin's: counted in whole units, and never overcommitted.
func extended(name corev1.ResourceName) bool {
	if native(name) || strings.HasPrefix(string(name), corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+string(name))) == 0
}

// overcommittable says whether a request of name may be less than its
// limit, or come without one: Kubernetes' own resources but huge pages.
func overcommittable(name corev1.ResourceName) bool {
	return native(name) && !strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

func sortedNames(list corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(list))
	for n := range list {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// checkTolerations applies the apiserver's rules for a pod's tolerations.
// Lt and Gt, which a feature gate allows, need only a number here.
func checkTolerations(tolerations []corev1.Toleration) error {
	for i, t := range tolerations {
		path := field.NewPath("spec", "podTemplate", "tolerations").Index(i)
		at := func(child string) string { return path.Child(child).String() }
		if t.Key != "" {
			if msgs := validation.IsQualifiedName(t.Key); len(msgs) > 0 {
				return &Error{at("key"), fmt.Sprintf("%.100q: %s", t.Key, msgs[0])}
			}
		} else if t.Operator != corev1.TolerationOpExists {
			return &Error{at("operator"), "must be Exists when key is empty (a toleration of every taint)"}
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			return &Error{at("effect"), "must be NoExecute when tolerationSeconds is set"}
		}
		switch t.Operator {
		case corev1.TolerationOpEqual, "":
			if msgs := validation.IsValidLabelValue(t.Value); len(msgs) > 0 {
				return &Error{at("value"), fmt.Sprintf("%.100q: %s", t.Value, msgs[0])}
			}
		case corev1.TolerationOpExists:
			if t.Value != "" {
				return &Error{at("value"), "must be empty when operator is Exists"}
			}
		case corev1.TolerationOpLt, corev1.TolerationOpGt:
			if _, err := strconv.ParseInt(t.Value, 10, 64); err != nil {
				return &Error{at("value"), fmt.Sprintf("%.100q: must be a whole number when operator is %s", t.Value, t.Operator)}
			}
		default:
			return &Error{at("operator"), fmt.Sprintf("%.100q: must be Equal or Exists", t.Operator)}
		}
		switch t.Effect {
		case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			return &Error{at("effect"), fmt.Sprintf("%.100q: must be NoSchedule, PreferNoSchedule or NoExecute (or empty, for every effect)", t.Effect)}
		}
	}
	return nil
}
