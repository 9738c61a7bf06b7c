package values

import (
	"cmp"
	"fmt"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// The apiserver's bounds of an autoscaler's scaling rules.
const (
	maxStabilizationWindowSeconds = 3600
	maxPolicyPeriodSeconds        = 1800
)

// checkBehavior applies the apiserver's rules for an autoscaler's
// behavior, which the CRD's schema (Kubernetes' own type, without its
// validation) cannot state. The autoscaler is the last object Helm
// creates: a behavior the apiserver refuses would leave a release
// half made, the Deployment serving without its autoscaler, and an
// upgrade half applied. controllers'
// TestTheOperatorRefusesTheAutoscalerBehaviorTheAPIServerRefuses holds
// the rules to the apiserver.
func checkBehavior(b *autoscalingv2.HorizontalPodAutoscalerBehavior) error {
	if b == nil {
		return nil
	}
	path := field.NewPath("spec", "autoscaling", "behavior")
	for _, side := range []struct {
		name  string
		rules *autoscalingv2.HPAScalingRules
	}{{"scaleUp", b.ScaleUp}, {"scaleDown", b.ScaleDown}} {
		if side.rules == nil {
			continue
		}
		if err := checkScalingRules(*side.rules, path.Child(side.name)); err != nil {
			return err
		}
	}
	return nil
}

func checkScalingRules(r autoscalingv2.HPAScalingRules, path *field.Path) error {
	if w := r.StabilizationWindowSeconds; w != nil && (*w < 0 || *w > maxStabilizationWindowSeconds) {
		return &Error{path.Child("stabilizationWindowSeconds").String(), fmt.Sprintf("%d: must be between 0 and %d", *w, maxStabilizationWindowSeconds)}
	}
	if s := r.SelectPolicy; s != nil {
		switch *s {
		case autoscalingv2.MaxChangePolicySelect, autoscalingv2.MinChangePolicySelect, autoscalingv2.DisabledPolicySelect:
		default:
			return &Error{path.Child("selectPolicy").String(), badValue(string(*s), "must be Max, Min or Disabled")}
		}
	}
	// No policies at all is not refused: the values leave an empty list
	// out, and the apiserver fills in its default policies.
	for i, p := range r.Policies {
		at := func(child string) string { return path.Child("policies").Index(i).Child(child).String() }
		switch {
		case p.Type != autoscalingv2.PodsScalingPolicy && p.Type != autoscalingv2.PercentScalingPolicy:
			return &Error{at("type"), badValue(string(p.Type), "must be Pods or Percent")}
		case p.Value <= 0:
			return &Error{at("value"), fmt.Sprintf("%d: must be greater than zero", p.Value)}
		case p.PeriodSeconds <= 0 || p.PeriodSeconds > maxPolicyPeriodSeconds:
			return &Error{at("periodSeconds"), fmt.Sprintf("%d: must be between 1 and %d", p.PeriodSeconds, maxPolicyPeriodSeconds)}
		}
	}
	if t := r.Tolerance; t != nil && t.Sign() < 0 {
		return &Error{path.Child("tolerance").String(), fmt.Sprintf("%s: must not be negative", t.String())}
	}
	return nil
}

// unmeasuredTargets warn of utilization targets the autoscaler cannot
// measure: it reads a pod's use as a share of its containers' requests,
// and without a request (or a limit, which the request then defaults to)
// it reports the metric missing and never scales. A LimitRange of the
// namespace may give the pods one, so the spec is not refused.
func unmeasuredTargets(a *servingv1alpha1.Autoscaling, r corev1.ResourceRequirements) []string {
	var warnings []string
	for _, t := range []struct {
		field string
		name  corev1.ResourceName
		set   bool
	}{
		{"targetCPUUtilizationPercentage", corev1.ResourceCPU, a.TargetCPUUtilizationPercentage != nil},
		{"targetMemoryUtilizationPercentage", corev1.ResourceMemory, a.TargetMemoryUtilizationPercentage != nil},
	} {
		_, request := r.Requests[t.name]
		_, limit := r.Limits[t.name]
		if t.set && !request && !limit {
			warnings = append(warnings, fmt.Sprintf("spec.autoscaling.%s: the serving container has no %s request (spec.resources.requests.%s): the autoscaler measures use as a share of it, and will not scale unless a LimitRange of the namespace gives the pods one", t.field, t.name, t.name))
		}
	}
	return warnings
}

// checkMetrics applies the apiserver's rules for an autoscaler's metrics
// to spec.autoscaling.metrics, for checkBehavior's reason: the CRD's
// schema is Kubernetes' type without its validation, and a metric the
// apiserver refuses would leave the release half made. controllers'
// TestTheOperatorRefusesTheAutoscalerMetricsTheAPIServerRefuses holds
// the rules to the apiserver.
func checkMetrics(metrics []autoscalingv2.MetricSpec) error {
	path := field.NewPath("spec", "autoscaling", "metrics")
	for i, m := range metrics {
		if err := checkMetric(m, path.Index(i)); err != nil {
			return err
		}
	}
	return nil
}

// metricSources are the sources of a metric, by type, with their fields'
// names, in the order they are checked.
var metricSources = []struct {
	typ   autoscalingv2.MetricSourceType
	field string
	set   func(autoscalingv2.MetricSpec) bool
}{
	{autoscalingv2.PodsMetricSourceType, "pods", func(m autoscalingv2.MetricSpec) bool { return m.Pods != nil }},
	{autoscalingv2.ObjectMetricSourceType, "object", func(m autoscalingv2.MetricSpec) bool { return m.Object != nil }},
	{autoscalingv2.ExternalMetricSourceType, "external", func(m autoscalingv2.MetricSpec) bool { return m.External != nil }},
	{autoscalingv2.ResourceMetricSourceType, "resource", func(m autoscalingv2.MetricSpec) bool { return m.Resource != nil }},
	{autoscalingv2.ContainerResourceMetricSourceType, "containerResource", func(m autoscalingv2.MetricSpec) bool { return m.ContainerResource != nil }},
}

func checkMetric(m autoscalingv2.MetricSpec, at *field.Path) error {
	known := false
	for _, s := range metricSources {
		switch {
		case s.typ == m.Type && !s.set(m):
			return &Error{at.Child(s.field).String(), fmt.Sprintf("must be set for type %s", m.Type)}
		case s.typ != m.Type && s.set(m):
			return &Error{at.Child(s.field).String(), fmt.Sprintf("must not be set for type %s: a metric has one source, the one its type names", cmp.Or(string(m.Type), `""`))}
		}
		known = known || s.typ == m.Type
	}
	if !known {
		return &Error{at.Child("type").String(), badValue(string(m.Type), "must be Pods, Object, External, Resource or ContainerResource")}
	}
	switch m.Type {
	case autoscalingv2.PodsMetricSourceType:
		at = at.Child("pods")
		if err := checkMetricIdentifier(m.Pods.Metric, at.Child("metric")); err != nil {
			return err
		}
		return checkMetricTarget(m.Pods.Target, at.Child("target"), false, "averageValue")
	case autoscalingv2.ObjectMetricSourceType:
		at = at.Child("object")
		ref := m.Object.DescribedObject
		for _, f := range []struct{ name, value string }{{"kind", ref.Kind}, {"name", ref.Name}} {
			if problem := pathSegmentProblem(f.value); problem != "" {
				return &Error{at.Child("describedObject", f.name).String(), problem}
			}
		}
		if err := checkMetricIdentifier(m.Object.Metric, at.Child("metric")); err != nil {
			return err
		}
		return checkMetricTarget(m.Object.Target, at.Child("target"), false, "value", "averageValue")
	case autoscalingv2.ExternalMetricSourceType:
		at = at.Child("external")
		if err := checkMetricIdentifier(m.External.Metric, at.Child("metric")); err != nil {
			return err
		}
		return checkMetricTarget(m.External.Target, at.Child("target"), true, "value", "averageValue")
	case autoscalingv2.ResourceMetricSourceType:
		at = at.Child("resource")
		if m.Resource.Name == "" {
			return &Error{at.Child("name").String(), "must name a resource (cpu, memory)"}
		}
		return checkMetricTarget(m.Resource.Target, at.Child("target"), true, "averageUtilization", "averageValue")
	default: // ContainerResource
		at = at.Child("containerResource")
		if m.ContainerResource.Name == "" {
			return &Error{at.Child("name").String(), "must name a resource (cpu, memory)"}
		}
		if problems := validation.IsDNS1123Label(m.ContainerResource.Container); len(problems) > 0 {
			return &Error{at.Child("container").String(), badValue(m.ContainerResource.Container, "must name a container: "+problems[0])}
		}
		return checkMetricTarget(m.ContainerResource.Target, at.Child("target"), true, "averageUtilization", "averageValue")
	}
}

// checkMetricIdentifier: a metric's name goes into a URL path of the
// metrics API. Its selector is not checked, as the apiserver does not:
// the metrics API refuses a bad one, and the autoscaler says so.
func checkMetricIdentifier(id autoscalingv2.MetricIdentifier, at *field.Path) error {
	if problem := pathSegmentProblem(id.Name); problem != "" {
		return &Error{at.Child("name").String(), problem}
	}
	return nil
}

func pathSegmentProblem(s string) string {
	if s == "" {
		return "must not be empty"
	}
	if problems := content.IsPathSegmentName(s); len(problems) > 0 {
		return badValue(s, problems[0])
	}
	return ""
}

// checkMetricTarget checks a target, which needs one of the values its
// source names in one, and, for an exclusive source, no more than one.
func checkMetricTarget(t autoscalingv2.MetricTarget, at *field.Path, exclusive bool, one ...string) error {
	switch t.Type {
	case autoscalingv2.UtilizationMetricType, autoscalingv2.ValueMetricType, autoscalingv2.AverageValueMetricType:
	default:
		return &Error{at.Child("type").String(), badValue(string(t.Type), "must be Utilization, Value or AverageValue")}
	}
	given := map[string]bool{"averageUtilization": t.AverageUtilization != nil, "value": t.Value != nil, "averageValue": t.AverageValue != nil}
	switch {
	case t.Value != nil && t.Value.Sign() <= 0:
		return &Error{at.Child("value").String(), t.Value.String() + ": must be positive"}
	case t.AverageValue != nil && t.AverageValue.Sign() <= 0:
		return &Error{at.Child("averageValue").String(), t.AverageValue.String() + ": must be positive"}
	case t.AverageUtilization != nil && *t.AverageUtilization < 1:
		return &Error{at.Child("averageUtilization").String(), fmt.Sprintf("%d: must be greater than zero", *t.AverageUtilization)}
	}
	set := 0
	for _, f := range one {
		if given[f] {
			set++
		}
	}
	switch {
	case set == 0:
		return &Error{at.String(), "needs " + strings.Join(one, " or ")}
	case set > 1 && exclusive:
		return &Error{at.String(), "takes one of " + strings.Join(one, " and ") + ", not both"}
	}
	return nil
}
