package status

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
)

// AutoscalerGrace is how long the autoscaler may say it cannot set the
// replica count before the ModelServer says so. A new autoscaler has no
// metrics of new pods until the metrics pipeline has scraped them (a
// minute or so with metrics-server), and says so meanwhile: that is a
// wait, not a fault. A cluster without a metrics API, a target without
// the resource request it is a share of, or a scale the autoscaler cannot
// read or write say it for good.
const AutoscalerGrace = 2 * time.Minute

// podName is how the autoscaler names the pod a metric is missing for.
// Another pod may be named at each of its syncs (every 15 s): left in, it
// would rewrite the status each time.
var podName = regexp.MustCompile(` of Pod [^ :]+`)

// AutoscalerProblem is what the autoscaler says keeps it from setting the
// replica count, once it has said so for AutoscalerGrace, for a warning
// of spec.autoscaling and an Event; or "" with how long until the problem it says now,
// if any, has lasted that long. hpa may be nil.
func AutoscalerProblem(hpa *autoscalingv2.HorizontalPodAutoscaler, now time.Time) (problem string, due time.Duration) {
	c := autoscalerFault(hpa)
	if ok, due := lasted(c, AutoscalerGrace, now); !ok {
		return "", due
	}
	return oneLine(fmt.Sprintf("the autoscaler cannot scale the serving pods (%s): %s",
		c.Reason, podName.ReplaceAllString(c.Message, " of a serving pod"))), 0
}

// The causes an inactive autoscaler is counted under
// (AutoscalerCause).
const (
	AutoscalerCauseMetrics      = "Metrics"
	AutoscalerCauseSelector     = "Selector"
	AutoscalerCauseScale        = "Scale"
	AutoscalerCauseScaledToZero = "ScaledToZero"
	AutoscalerCauseOther        = "Other"
)

// AutoscalerCauses are all of them, for a gauge to show each from the
// start.
var AutoscalerCauses = []string{AutoscalerCauseMetrics, AutoscalerCauseSelector, AutoscalerCauseScale, AutoscalerCauseScaledToZero, AutoscalerCauseOther}

// AutoscalerCause sorts the autoscaler's reason for not scaling into a
// few causes, for a metric's label: its reasons are many and may grow
// (one per kind of metric it cannot read).
func AutoscalerCause(reason string) string {
	switch {
	case strings.Contains(reason, "Metric"):
		return AutoscalerCauseMetrics
	case strings.HasSuffix(reason, "Selector"):
		return AutoscalerCauseSelector
	case reason == "FailedGetScale" || reason == "FailedUpdateScale":
		return AutoscalerCauseScale
	case reason == "ScalingDisabled":
		return AutoscalerCauseScaledToZero
	}
	return AutoscalerCauseOther
}

// AutoscalerFault is the reason the autoscaler gives for not scaling, or
// "": what of its status, rewritten at each of its syncs, matters to the
// ModelServer. A new message for the same reason is read at the next
// reconcile.
func AutoscalerFault(hpa *autoscalingv2.HorizontalPodAutoscaler) string {
	if c := autoscalerFault(hpa); c != nil {
		return c.Reason
	}
	return ""
}

// autoscalerFault is the autoscaler's condition saying it cannot scale:
// AbleToScale (a scale it cannot read or write), else ScalingActive
// (metrics it cannot read or use, a selector it cannot use, a target
// scaled to zero) when False; or nil.
func autoscalerFault(hpa *autoscalingv2.HorizontalPodAutoscaler) *autoscalingv2.HorizontalPodAutoscalerCondition {
	if hpa == nil {
		return nil
	}
	for _, t := range []autoscalingv2.HorizontalPodAutoscalerConditionType{autoscalingv2.AbleToScale, autoscalingv2.ScalingActive} {
		for i, c := range hpa.Status.Conditions {
			if c.Type == t && c.Status == corev1.ConditionFalse {
				return &hpa.Status.Conditions[i]
			}
		}
	}
	return nil
}

// AutoscalerLimitGrace is how long the autoscaler must have wanted more
// pods than its maximum before the ModelServer says so: load at the edge
// of the maximum turns the condition on and off at its syncs, and a
// limit that does not last is no capacity problem.
const AutoscalerLimitGrace = time.Minute

// AutoscalerAtMaximum says that the autoscaler wants more serving pods
// than spec.autoscaling.maxReplicas allows, once it has wanted them for
// AutoscalerLimitGrace, for a warning of spec.autoscaling and an Event;
// or "" with how long until the limit it reports now, if any, has lasted
// that long. The ModelServer serves, and stays Ready: the warning is for
// whoever sets the maximum. hpa may be nil.
func AutoscalerAtMaximum(hpa *autoscalingv2.HorizontalPodAutoscaler, now time.Time) (limit string, due time.Duration) {
	c := atMaximum(hpa)
	if ok, due := lasted(c, AutoscalerLimitGrace, now); !ok {
		return "", due
	}
	// The time it began, not how long ago: the words stay the same, and so
	// does the status.
	return fmt.Sprintf("the autoscaler has wanted more serving pods than maxReplicas (%d) allows since %s: raise spec.autoscaling.maxReplicas if the cluster has room for them",
		hpa.Spec.MaxReplicas, c.LastTransitionTime.UTC().Format(time.RFC3339)), 0
}

// AutoscalerLimited tells whether the autoscaler says it wants more pods
// than its maximum: what of its ScalingLimited condition, rewritten at
// each of its syncs, matters to the ModelServer.
func AutoscalerLimited(hpa *autoscalingv2.HorizontalPodAutoscaler) bool {
	return atMaximum(hpa) != nil
}

// atMaximum is the autoscaler's ScalingLimited condition when it is True
// for TooManyReplicas (the count it wants, capped at maxReplicas); not for
// TooFewReplicas (an idle server held at minReplicas, as meant) nor for
// the rate limits of spec.autoscaling.behavior, which pass.
func atMaximum(hpa *autoscalingv2.HorizontalPodAutoscaler) *autoscalingv2.HorizontalPodAutoscalerCondition {
	if hpa == nil {
		return nil
	}
	for i, c := range hpa.Status.Conditions {
		if c.Type == autoscalingv2.ScalingLimited && c.Status == corev1.ConditionTrue && c.Reason == "TooManyReplicas" {
			return &hpa.Status.Conditions[i]
		}
	}
	return nil
}

// lasted tells whether condition c, when there is one, has held for
// grace; if not yet, due is how long until it has.
func lasted(c *autoscalingv2.HorizontalPodAutoscalerCondition, grace time.Duration, now time.Time) (ok bool, due time.Duration) {
	if c == nil {
		return false, 0
	}
	if left := c.LastTransitionTime.Add(grace).Sub(now); left > 0 {
		return false, left
	}
	return true, 0
}
