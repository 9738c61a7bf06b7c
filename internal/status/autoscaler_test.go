package status

import (
	"slices"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

func autoscaler(conditions ...autoscalingv2.HorizontalPodAutoscalerCondition) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{Status: autoscalingv2.HorizontalPodAutoscalerStatus{Conditions: conditions}}
}

func hpaCondition(t autoscalingv2.HorizontalPodAutoscalerConditionType, s corev1.ConditionStatus, since time.Duration, reason, message string) autoscalingv2.HorizontalPodAutoscalerCondition {
	return autoscalingv2.HorizontalPodAutoscalerCondition{
		Type: t, Status: s, Reason: reason, Message: message,
		LastTransitionTime: metav1.NewTime(testNow.Add(-since)),
	}
}

// TestAnAutoscalerThatCannotScaleIsWarnedOfOnceItLasts: what the autoscaler
// says keeps it from scaling is a warning once it has said so for the
// grace, and a wait before; the pod it names is left out, so that the
// next pod it names costs no write.
func TestAnAutoscalerThatCannotScaleIsWarnedOfOnceItLasts(t *testing.T) {
	noMetrics := "the HPA was unable to compute the replica count: failed to get cpu utilization: unable to get metrics for resource cpu: unable to fetch metrics from resource metrics API: the server could not find the requested resource (get pods.metrics.k8s.io)"
	able := hpaCondition(autoscalingv2.AbleToScale, corev1.ConditionTrue, time.Hour, "SucceededGetScale", "the HPA controller was able to get the target's current scale")
	for _, tc := range []struct {
		name    string
		hpa     *autoscalingv2.HorizontalPodAutoscaler
		want    string
		wantDue time.Duration
	}{
		{"none", nil, "", 0},
		{"no status yet", autoscaler(), "", 0},
		{"scaling", autoscaler(able, hpaCondition(autoscalingv2.ScalingActive, corev1.ConditionTrue, time.Hour, "ValidMetricFound", "the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)")), "", 0},
		{"no metrics for a minute", autoscaler(able, hpaCondition(autoscalingv2.ScalingActive, corev1.ConditionFalse, time.Minute, "FailedGetResourceMetric", noMetrics)), "", time.Minute},
		{"no metrics API", autoscaler(able, hpaCondition(autoscalingv2.ScalingActive, corev1.ConditionFalse, AutoscalerGrace, "FailedGetResourceMetric", noMetrics)),
			"the autoscaler cannot scale the serving pods (FailedGetResourceMetric): " + noMetrics, 0},
		{"no request", autoscaler(able, hpaCondition(autoscalingv2.ScalingActive, corev1.ConditionFalse, time.Hour, "FailedGetResourceMetric", "the HPA was unable to compute the replica count: failed to get memory utilization: missing request for memory in container tensorflow-serving of Pod resnet-7d9f8-x2x8z")),
			"the autoscaler cannot scale the serving pods (FailedGetResourceMetric): the HPA was unable to compute the replica count: failed to get memory utilization: missing request for memory in container tensorflow-serving of a serving pod", 0},
		{"a scale it cannot write", autoscaler(
			hpaCondition(autoscalingv2.AbleToScale, corev1.ConditionFalse, 3*time.Minute, "FailedUpdateScale", "the HPA controller was unable to update the target scale: deployments.apps \"resnet\" is forbidden: exceeded quota"),
			hpaCondition(autoscalingv2.ScalingActive, corev1.ConditionTrue, time.Hour, "ValidMetricFound", "…")),
			`the autoscaler cannot scale the serving pods (FailedUpdateScale): the HPA controller was unable to update the target scale: deployments.apps "resnet" is forbidden: exceeded quota`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, due := AutoscalerProblem(tc.hpa, testNow)
			if got != tc.want || due != tc.wantDue {
				t.Errorf("AutoscalerProblem =\n  %q, due in %v\nwant\n  %q, due in %v", got, due, tc.want, tc.wantDue)
			}
		})
	}
}

// TestAnAutoscalerAtItsMaximumIsWarnedOfOnceItLasts: an autoscaler that
// has wanted more pods than its maximum for the grace is a warning that
// names the maximum and when it began, in words that stay the same while
// it lasts; held at its minimum, or slowed by its behavior's rate, it is
// not.
func TestAnAutoscalerAtItsMaximumIsWarnedOfOnceItLasts(t *testing.T) {
	limited := func(reason string, since time.Duration) *autoscalingv2.HorizontalPodAutoscaler {
		hpa := autoscaler(
			hpaCondition(autoscalingv2.ScalingActive, corev1.ConditionTrue, time.Hour, "ValidMetricFound", "…"),
			hpaCondition(autoscalingv2.ScalingLimited, corev1.ConditionTrue, since, reason, "…"))
		hpa.Spec.MaxReplicas = 8
		return hpa
	}
	within := autoscaler(hpaCondition(autoscalingv2.ScalingLimited, corev1.ConditionFalse, time.Hour, "DesiredWithinRange", "the desired count is within the acceptable range"))
	began := testNow.Add(-5 * time.Minute).UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		name    string
		hpa     *autoscalingv2.HorizontalPodAutoscaler
		want    string
		wantDue time.Duration
	}{
		{"none", nil, "", 0},
		{"within range", within, "", 0},
		{"held at its minimum", limited("TooFewReplicas", time.Hour), "", 0},
		{"slowed by its behavior", limited("ScaleUpLimit", time.Hour), "", 0},
		{"at its maximum for 20 s", limited("TooManyReplicas", 20*time.Second), "", 40 * time.Second},
		{"at its maximum for 5 min", limited("TooManyReplicas", 5*time.Minute),
			"the autoscaler has wanted more serving pods than maxReplicas (8) allows since " + began + ": raise spec.autoscaling.maxReplicas if the cluster has room for them", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, due := AutoscalerAtMaximum(tc.hpa, testNow)
			if got != tc.want || due != tc.wantDue {
				t.Errorf("AutoscalerAtMaximum =\n  %q, due in %v\nwant\n  %q, due in %v", got, due, tc.want, tc.wantDue)
			}
			if later, _ := AutoscalerAtMaximum(tc.hpa, testNow.Add(time.Hour)); tc.want != "" && later != got {
				t.Errorf("an hour later the warning reads %q: its words change while it lasts, and each change is a status write", later)
			}
			if AutoscalerLimited(tc.hpa) != strings.HasPrefix(tc.name, "at its maximum") {
				t.Errorf("AutoscalerLimited = %v", AutoscalerLimited(tc.hpa))
			}
		})
	}

	o := Observation{AutoscalerLimit: "x", Warnings: []string{"spec.gateway: y"}}
	if st := Compute(servingv1alpha1.ModelServerStatus{}, o, testNow); !slices.Equal(st.Warnings, []string{"spec.gateway: y", "spec.autoscaling: x"}) {
		t.Errorf("warnings %q", st.Warnings)
	}
}

// The autoscaler's problem is a warning beside the spec's own, which it
// leaves as they were.
func TestAnAutoscalersProblemJoinsTheSpecsWarnings(t *testing.T) {
	spec := make([]string, 1, 4)
	spec[0] = "spec.gateway: the cluster has no HTTPRoute API"
	o := Observation{Warnings: spec, AutoscalerProblem: "the autoscaler cannot scale the serving pods (X): y"}
	st := Compute(servingv1alpha1.ModelServerStatus{}, o, testNow)
	if want := []string{spec[0], "spec.autoscaling: the autoscaler cannot scale the serving pods (X): y"}; !slices.Equal(st.Warnings, want) {
		t.Errorf("warnings %q, want %q", st.Warnings, want)
	}
	if spec[:2][1] != "" {
		t.Error("the spec's warnings were written into")
	}
}

// The autoscaler's reasons, one per kind of metric among them, come down
// to a few causes for the gauge.
func TestAnAutoscalersReasonsComeDownToAFewCauses(t *testing.T) {
	for reason, want := range map[string]string{
		"FailedGetResourceMetric":          AutoscalerCauseMetrics,
		"FailedGetContainerResourceMetric": AutoscalerCauseMetrics,
		"FailedGetExternalMetric":          AutoscalerCauseMetrics,
		"InvalidMetricSourceType":          AutoscalerCauseMetrics,
		"InvalidSelector":                  AutoscalerCauseSelector,
		"AmbiguousSelector":                AutoscalerCauseSelector,
		"FailedGetScale":                   AutoscalerCauseScale,
		"FailedUpdateScale":                AutoscalerCauseScale,
		"ScalingDisabled":                  AutoscalerCauseScaledToZero,
		"SomethingNew":                     AutoscalerCauseOther,
	} {
		if got := AutoscalerCause(reason); got != want {
			t.Errorf("AutoscalerCause(%s) = %s, want %s", reason, got, want)
		}
	}
}
