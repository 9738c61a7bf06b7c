package values

import (
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
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
