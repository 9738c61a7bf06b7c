package values

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The rules below are the apiserver's for a pod's container resources and
// environment, tolerations, affinity and topology spread constraints,
// which the CRD's schema (Kubernetes' own types, without their validation)
// cannot state. A spec that breaks one would get part of its release
// created, and the Deployment refused with a message about the
// Deployment; the operator names the ModelServer's field instead, and
// creates nothing. They are written to refuse only what every apiserver
// refuses: what a feature gate or a newer version may allow is left for
// the apiserver to say. controllers' TestTheOperatorRefusesThePodSettingsTheAPIServerRefuses
// holds them to the apiserver.

// checkResources applies the apiserver's rules for a container's
// resources to those of the container at path.
func checkResources(path *field.Path, r corev1.ResourceRequirements) error {
	for _, side := range []struct {
		name string
		list corev1.ResourceList
	}{{"limits", r.Limits}, {"requests", r.Requests}} {
		for _, name := range slices.Sorted(maps.Keys(side.list)) {
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
	for _, name := range slices.Sorted(maps.Keys(r.Requests)) {
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
		return &Error{path.Child("claims").String(), "the pods declare no resource claims for the container to use"}
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
		if strings.HasPrefix(string(name), corev1.DefaultResourceRequestsPrefix) {
			return fmt.Sprintf("%.100q is not a resource of containers: a domain's resource must not start with %q", name, corev1.DefaultResourceRequestsPrefix)
		}
		return fmt.Sprintf("%.100q is not a resource of containers: its name in a quota, %q followed by it, must be a qualified name",
			name, corev1.DefaultResourceRequestsPrefix)
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

// checkTolerations applies the apiserver's rules for a pod's tolerations.
// Lt and Gt, which a feature gate allows, need only a number here.
func checkTolerations(tolerations []corev1.Toleration) error {
	for i, t := range tolerations {
		path := field.NewPath("spec", "podTemplate", "tolerations").Index(i)
		at := func(child string) string { return path.Child(child).String() }
		if t.Key != "" {
			if msgs := validation.IsQualifiedName(t.Key); len(msgs) > 0 {
				return &Error{at("key"), badValue(t.Key, msgs[0])}
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
				return &Error{at("value"), badValue(t.Value, msgs[0])}
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

// checkAffinity applies the apiserver's rules for a pod's affinity. The
// keys an affinity term takes from the pod's labels (matchLabelKeys,
// mismatchLabelKeys) are left for the apiserver to judge.
func checkAffinity(a *corev1.Affinity) error {
	if a == nil {
		return nil
	}
	path := field.NewPath("spec", "podTemplate", "affinity")
	if err := checkNodeAffinity(a.NodeAffinity, path.Child("nodeAffinity")); err != nil {
		return err
	}
	if pa := a.PodAffinity; pa != nil {
		err := checkPodAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, path.Child("podAffinity"))
		if err != nil {
			return err
		}
	}
	if pa := a.PodAntiAffinity; pa != nil {
		return checkPodAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, path.Child("podAntiAffinity"))
	}
	return nil
}

func checkNodeAffinity(na *corev1.NodeAffinity, path *field.Path) error {
	if na == nil {
		return nil
	}
	if req := na.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
		rp := path.Child("requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
		if len(req.NodeSelectorTerms) == 0 {
			return &Error{rp.String(), "must have at least one term"}
		}
		for i, term := range req.NodeSelectorTerms {
			if err := checkNodeSelectorTerm(term, true, rp.Index(i)); err != nil {
				return err
			}
		}
	}
	for i, p := range na.PreferredDuringSchedulingIgnoredDuringExecution {
		pp := path.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
		if err := checkWeight(p.Weight, pp); err != nil {
			return err
		}
		// A preference may name a label value no node can have.
		if err := checkNodeSelectorTerm(p.Preference, false, pp.Child("preference")); err != nil {
			return err
		}
	}
	return nil
}

func checkPodAffinityTerms(required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm, path *field.Path) error {
	for i, term := range required {
		if err := checkPodAffinityTerm(term, path.Child("requiredDuringSchedulingIgnoredDuringExecution").Index(i)); err != nil {
			return err
		}
	}
	for i, w := range preferred {
		wp := path.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
		if err := checkWeight(w.Weight, wp); err != nil {
			return err
		}
		if err := checkPodAffinityTerm(w.PodAffinityTerm, wp.Child("podAffinityTerm")); err != nil {
			return err
		}
	}
	return nil
}

func checkWeight(w int32, path *field.Path) error {
	if w < 1 || w > 100 {
		return &Error{path.Child("weight").String(), fmt.Sprintf("%d: must be from 1 to 100", w)}
	}
	return nil
}

// checkNodeSelectorTerm applies the rules for one term of a node affinity;
// strict, the values of its expressions must be label values.
func checkNodeSelectorTerm(term corev1.NodeSelectorTerm, strict bool, path *field.Path) error {
	for i, e := range term.MatchExpressions {
		if err := checkNodeSelectorRequirement(e, strict, path.Child("matchExpressions").Index(i)); err != nil {
			return err
		}
	}
	for i, f := range term.MatchFields {
		fp := path.Child("matchFields").Index(i)
		if f.Key != metav1.ObjectNameField {
			return &Error{fp.Child("key").String(), fmt.Sprintf("%.100q: the only field a node is matched by is %s", f.Key, metav1.ObjectNameField)}
		}
		if f.Operator != corev1.NodeSelectorOpIn && f.Operator != corev1.NodeSelectorOpNotIn {
			return &Error{fp.Child("operator").String(), fmt.Sprintf("%.100q: must be In or NotIn", f.Operator)}
		}
		if len(f.Values) != 1 {
			return &Error{fp.Child("values").String(), "must name exactly one node"}
		}
		if msgs := validation.IsDNS1123Subdomain(f.Values[0]); len(msgs) > 0 {
			return &Error{fp.Child("values").Index(0).String(), fmt.Sprintf("%.100q is not a node name: %s", f.Values[0], msgs[0])}
		}
	}
	return nil
}

// checkNodeSelectorRequirement applies the rules for one expression of a
// node selector term; strict, its values must be label values.
func checkNodeSelectorRequirement(e corev1.NodeSelectorRequirement, strict bool, ep *field.Path) error {
	switch e.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(e.Values) == 0 {
			return &Error{ep.Child("values").String(), fmt.Sprintf("must name at least one value when operator is %s", e.Operator)}
		}
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if len(e.Values) > 0 {
			return &Error{ep.Child("values").String(), fmt.Sprintf("must be empty when operator is %s", e.Operator)}
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(e.Values) != 1 {
			return &Error{ep.Child("values").String(), fmt.Sprintf("must name exactly one value when operator is %s", e.Operator)}
		}
	default:
		return &Error{ep.Child("operator").String(), fmt.Sprintf("%.100q: must be In, NotIn, Exists, DoesNotExist, Gt or Lt", e.Operator)}
	}
	if msgs := validation.IsQualifiedName(e.Key); len(msgs) > 0 {
		return &Error{ep.Child("key").String(), badValue(e.Key, msgs[0])}
	}
	if !strict {
		return nil
	}
	for j, v := range e.Values {
		if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
			return &Error{ep.Child("values").Index(j).String(), badValue(v, msgs[0])}
		}
	}
	return nil
}

// checkPodAffinityTerm applies the rules for a term of pod affinity or
// anti-affinity.
func checkPodAffinityTerm(term corev1.PodAffinityTerm, path *field.Path) error {
	if err := checkLabelSelector(term.LabelSelector, path.Child("labelSelector")); err != nil {
		return err
	}
	if err := checkLabelSelector(term.NamespaceSelector, path.Child("namespaceSelector")); err != nil {
		return err
	}
	for i, ns := range term.Namespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			return &Error{path.Child("namespaces").Index(i).String(), fmt.Sprintf("%.100q is not a namespace name: %s", ns, msgs[0])}
		}
	}
	if term.TopologyKey == "" {
		return &Error{path.Child("topologyKey").String(), "must be set: the node label whose value makes a domain, such as kubernetes.io/hostname"}
	}
	if msgs := validation.IsQualifiedName(term.TopologyKey); len(msgs) > 0 {
		return &Error{path.Child("topologyKey").String(), badValue(term.TopologyKey, msgs[0])}
	}
	return nil
}

// checkLabelSelector applies the apiserver's rules for a label selector
// of a pod's, which take only label values.
func checkLabelSelector(sel *metav1.LabelSelector, path *field.Path) error {
	if errs := metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, path); len(errs) > 0 {
		return &Error{errs[0].Field, firstError(errs)}
	}
	return nil
}

// checkSpread applies the apiserver's rules for a pod's topology spread
// constraints; the keys a constraint takes from the pod's labels
// (matchLabelKeys) are left for the apiserver to judge.
func checkSpread(constraints []corev1.TopologySpreadConstraint) error {
	for i, c := range constraints {
		path := field.NewPath("spec", "podTemplate", "topologySpreadConstraints").Index(i)
		at := func(child string) string { return path.Child(child).String() }
		if c.MaxSkew < 1 {
			return &Error{at("maxSkew"), fmt.Sprintf("%d: must be at least 1", c.MaxSkew)}
		}
		if c.TopologyKey == "" {
			return &Error{at("topologyKey"), "must be set: the node label whose value makes a domain, such as topology.kubernetes.io/zone"}
		}
		if c.WhenUnsatisfiable != corev1.DoNotSchedule && c.WhenUnsatisfiable != corev1.ScheduleAnyway {
			return &Error{at("whenUnsatisfiable"), fmt.Sprintf("%.100q: must be DoNotSchedule or ScheduleAnyway", c.WhenUnsatisfiable)}
		}
		for _, later := range constraints[i+1:] {
			if later.TopologyKey == c.TopologyKey && later.WhenUnsatisfiable == c.WhenUnsatisfiable {
				return &Error{path.String(), fmt.Sprintf("another constraint has the same topologyKey and whenUnsatisfiable (%s, %s)", c.TopologyKey, c.WhenUnsatisfiable)}
			}
		}
		if c.MinDomains != nil {
			if *c.MinDomains < 1 {
				return &Error{at("minDomains"), fmt.Sprintf("%d: must be at least 1", *c.MinDomains)}
			}
			if c.WhenUnsatisfiable != corev1.DoNotSchedule {
				return &Error{at("minDomains"), "needs whenUnsatisfiable: DoNotSchedule"}
			}
		}
		for _, p := range []struct {
			name   string
			policy *corev1.NodeInclusionPolicy
		}{{"nodeAffinityPolicy", c.NodeAffinityPolicy}, {"nodeTaintsPolicy", c.NodeTaintsPolicy}} {
			if p.policy != nil && *p.policy != corev1.NodeInclusionPolicyHonor && *p.policy != corev1.NodeInclusionPolicyIgnore {
				return &Error{at(p.name), fmt.Sprintf("%.100q: must be Honor or Ignore", *p.policy)}
			}
		}
		if err := checkLabelSelector(c.LabelSelector, path.Child("labelSelector")); err != nil {
			return err
		}
	}
	return nil
}

// downwardFields are the pod fields an environment variable can take its
// value from, besides a label or annotation.
var downwardFields = []string{
	"metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", "spec.serviceAccountName",
	"status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs",
}

// containerFields are the container resources an environment variable can
// take its value from, besides huge pages'.
var containerFields = []string{
	"limits.cpu", "limits.memory", "limits.ephemeral-storage", "requests.cpu", "requests.memory", "requests.ephemeral-storage",
}

// checkEnv applies the apiserver's rules for a container's environment.
// A name is held to the relaxed rule (printable ASCII but '='), the only
// one since Kubernetes 1.32; an older apiserver's stricter refusal is its
// own to say. A value from a file (fileKeyRef) is left to the apiserver.
func checkEnv(env []corev1.EnvVar) error {
	for i, e := range env {
		path := field.NewPath("spec", "podTemplate", "env").Index(i)
		if msgs := validation.IsRelaxedEnvVarName(e.Name); len(msgs) > 0 {
			return &Error{path.Child("name").String(), badValue(e.Name, msgs[0])}
		}
		if err := checkEnvSource(e, path.Child("valueFrom")); err != nil {
			return err
		}
	}
	return nil
}

func checkEnvSource(e corev1.EnvVar, path *field.Path) error {
	from := e.ValueFrom
	if from == nil {
		return nil
	}
	sources := 0
	for _, set := range []bool{from.FieldRef != nil, from.ResourceFieldRef != nil, from.ConfigMapKeyRef != nil, from.SecretKeyRef != nil, from.FileKeyRef != nil} {
		if set {
			sources++
		}
	}
	switch {
	case sources == 0:
		return &Error{path.String(), "must name one source: fieldRef, resourceFieldRef, configMapKeyRef or secretKeyRef"}
	case e.Value != "":
		return &Error{path.String(), "must not be set together with value"}
	case sources > 1:
		return &Error{path.String(), "must name one source, not several"}
	}
	if ref := from.FieldRef; ref != nil && (ref.APIVersion == "" || ref.APIVersion == "v1") {
		if err := checkDownwardField(ref.FieldPath, path.Child("fieldRef", "fieldPath")); err != nil {
			return err
		}
	}
	if ref := from.ResourceFieldRef; ref != nil && !slices.Contains(containerFields, ref.Resource) &&
		!strings.HasPrefix(ref.Resource, "requests.hugepages-") && !strings.HasPrefix(ref.Resource, "limits.hugepages-") {
		return &Error{path.Child("resourceFieldRef", "resource").String(),
			fmt.Sprintf("%.100q: must be one of %s, or a huge pages' request or limit", ref.Resource, strings.Join(containerFields, ", "))}
	}
	type keyRef struct{ kind, name, key string }
	var refs []keyRef
	if r := from.ConfigMapKeyRef; r != nil {
		refs = append(refs, keyRef{"configMapKeyRef", r.Name, r.Key})
	}
	if r := from.SecretKeyRef; r != nil {
		refs = append(refs, keyRef{"secretKeyRef", r.Name, r.Key})
	}
	for _, ref := range refs {
		if msgs := validation.IsDNS1123Subdomain(ref.name); len(msgs) > 0 {
			return &Error{path.Child(ref.kind, "name").String(), badValue(ref.name, msgs[0])}
		}
		if msgs := validation.IsConfigMapKey(ref.key); len(msgs) > 0 {
			return &Error{path.Child(ref.kind, "key").String(), badValue(ref.key, msgs[0])}
		}
	}
	return nil
}

// checkDownwardField refuses a field of the pod that an environment
// variable cannot take its value from.
func checkDownwardField(fieldPath string, path *field.Path) error {
	if slices.Contains(downwardFields, fieldPath) {
		return nil
	}
	for _, m := range []string{"metadata.labels", "metadata.annotations"} {
		if key, ok := strings.CutPrefix(fieldPath, m+"['"); ok && strings.HasSuffix(key, "']") {
			key = strings.TrimSuffix(key, "']")
			if m == "metadata.annotations" {
				key = strings.ToLower(key)
			}
			if msgs := validation.IsQualifiedName(key); len(msgs) > 0 {
				return &Error{path.String(), badValue(fieldPath, msgs[0])}
			}
			return nil
		}
	}
	return &Error{path.String(), fmt.Sprintf("%.100q: must be one of %s, or metadata.labels['<key>'] or metadata.annotations['<key>']",
		fieldPath, strings.Join(downwardFields, ", "))}
}
