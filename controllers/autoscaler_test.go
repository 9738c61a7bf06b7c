package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/status"
)

// TestAnAutoscalerThatCannotScaleIsWarnedOf: the local cluster has no
// metrics API, so the autoscaler kube-controller-manager runs says it
// cannot compute a replica count. Once it has said so for the grace, the
// status's warnings say it in its words, with one Warning Event, and the
// gauge counts it; the ModelServer serves, and stays Ready. Before, the
// reconciler looks again when the grace ends, as the autoscaler's syncs
// wake nothing. Without an autoscaler, the warning goes.
func TestAnAutoscalerThatCannotScaleIsWarnedOf(t *testing.T) {
	ctx := context.Background()
	_, r, rec := recordingReconciler(t)
	ms := createUnmanagedAutoscaled(t, "noscale")
	c := newClockedReconciler(t, r, ms)
	c.reconcileUntilReady()
	// Other tests' autoscalers, in the suite's operator, may be counted
	// meanwhile: only this one's count is sure.
	metricsCause := map[string]string{"cause": status.AutoscalerCauseMetrics}
	before := gather(t).value("modelserver_inactive_autoscalers", metricsCause)

	since := waitScalingInactive(t, ms)
	early := since.Add(status.AutoscalerGrace / 2)
	if result := c.reconcile(early); len(c.get().Status.Warnings) != 0 || !about(result.RequeueAfter, status.AutoscalerGrace/2) {
		t.Errorf("within the grace: warnings %q, look again in %v; want none, in %v", c.get().Status.Warnings, result.RequeueAfter, status.AutoscalerGrace/2)
	}

	c.reconcile(since.Add(status.AutoscalerGrace))
	got := c.get()
	const want = "spec.autoscaling: the autoscaler cannot scale the serving pods (FailedGetResourceMetric): the HPA was unable to compute the replica count: "
	if len(got.Status.Warnings) != 1 || !strings.HasPrefix(got.Status.Warnings[0], want) || !strings.Contains(got.Status.Warnings[0], "metrics.k8s.io") {
		t.Errorf("warnings %q, want one: %s… (metrics.k8s.io)", got.Status.Warnings, want)
	}
	if got.Status.Phase != servingv1alpha1.PhaseReady {
		t.Errorf("phase %s (%s): an autoscaler that cannot scale leaves the pods serving", got.Status.Phase, got.Status.Message)
	}
	c.reconcile(since.Add(2 * status.AutoscalerGrace))
	if n := rec.count("AutoscalerInactive"); n != 1 {
		t.Errorf("%d AutoscalerInactive Events, want 1; all:\n%s", n, rec)
	}
	if n := gather(t).value("modelserver_inactive_autoscalers", metricsCause) - before; n < 1 {
		t.Errorf("modelserver_inactive_autoscalers{cause=Metrics} grew by %v, want it to count this ModelServer", n)
	}

	got.Spec.Autoscaling, got.Spec.Replicas = nil, ptr.To[int32](1)
	if err := env.client.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	later, mark := since.Add(2*status.AutoscalerGrace), time.Now()
	eventually(t, 60*time.Second, "the warning gone with the autoscaler", func(context.Context) (bool, string) {
		c.reconcile(later.Add(time.Since(mark)))
		got := c.get()
		return got.Status.Phase == servingv1alpha1.PhaseReady && len(got.Status.Warnings) == 0, string(got.Status.Phase) + " " + strings.Join(got.Status.Warnings, "; ")
	})
}

// TestAnAutoscalerAtItsMaximumIsWarnedOf: an autoscaler that has wanted
// more pods than its maximum for a minute is a warning naming the
// maximum, with one Warning Event; the ModelServer serves, and stays
// Ready. Before the minute, the reconciler looks again when it ends, as
// the autoscaler's syncs wake nothing. The local cluster has no metrics
// API, so its autoscaler never wants more pods: the test writes the
// conditions of one that does, and writes them again if
// kube-controller-manager's autoscaler has written its own back at a
// sync meanwhile.
func TestAnAutoscalerAtItsMaximumIsWarnedOf(t *testing.T) {
	_, r, rec := recordingReconciler(t)
	ms := createUnmanagedAutoscaled(t, "atmax")
	c := newClockedReconciler(t, r, ms)
	c.reconcileUntilReady()
	since := time.Now().Truncate(time.Second)

	// reconcileAt reconciles at a time with the autoscaler saying it is
	// at its maximum (limited) or within its range, as the reconciler's
	// cache sees it.
	reconcileAt := func(at time.Time, limited bool, check func(*servingv1alpha1.ModelServer, ctrl.Result) string) {
		t.Helper()
		eventually(t, 60*time.Second, "the reconcile with the autoscaler's conditions written", func(ctx context.Context) (bool, string) {
			hpa := get(t, ms.Namespace, ms.Name, &autoscalingv2.HorizontalPodAutoscaler{})
			if err := writeAutoscalerLimited(ctx, hpa, since, limited); err != nil {
				return false, err.Error()
			}
			cached := &autoscalingv2.HorizontalPodAutoscaler{}
			if err := r.Get(ctx, client.ObjectKeyFromObject(hpa), cached); err != nil || status.AutoscalerLimited(cached) != limited {
				return false, "the reconciler's cache has not seen the conditions yet"
			}
			result := c.reconcile(at)
			if problem := check(c.get(), result); problem != "" {
				return false, problem
			}
			return true, ""
		})
	}

	reconcileAt(since.Add(status.AutoscalerLimitGrace/2), true, func(got *servingv1alpha1.ModelServer, result ctrl.Result) string {
		if len(got.Status.Warnings) != 0 || !about(result.RequeueAfter, status.AutoscalerLimitGrace/2) {
			return fmt.Sprintf("within the grace: warnings %q, look again in %v; want none, in %v", got.Status.Warnings, result.RequeueAfter, status.AutoscalerLimitGrace/2)
		}
		return ""
	})
	want := "spec.autoscaling: the autoscaler has wanted more serving pods than maxReplicas (3) allows since " + since.UTC().Format(time.RFC3339)
	for _, after := range []time.Duration{status.AutoscalerLimitGrace, 2 * status.AutoscalerLimitGrace} {
		reconcileAt(since.Add(after), true, func(got *servingv1alpha1.ModelServer, _ ctrl.Result) string {
			if len(got.Status.Warnings) != 1 || !strings.HasPrefix(got.Status.Warnings[0], want) {
				return fmt.Sprintf("warnings %q, want one: %s…", got.Status.Warnings, want)
			}
			if got.Status.Phase != servingv1alpha1.PhaseReady {
				return fmt.Sprintf("phase %s (%s): an autoscaler at its maximum leaves the pods serving", got.Status.Phase, got.Status.Message)
			}
			return ""
		})
	}
	if n := rec.count("AutoscalerAtMaximum"); n != 1 {
		t.Errorf("%d AutoscalerAtMaximum Events, want 1; all:\n%s", n, rec)
	}
	// Other tests' autoscalers, in the suite's operator, are never at their
	// maximum: the local cluster's cannot want more pods.
	if n := gather(t).value("modelserver_autoscalers_at_maximum", nil); n != 1 {
		t.Errorf("modelserver_autoscalers_at_maximum %v, want 1: this ModelServer", n)
	}

	reconcileAt(since.Add(3*status.AutoscalerLimitGrace), false, func(got *servingv1alpha1.ModelServer, _ ctrl.Result) string {
		if len(got.Status.Warnings) != 0 {
			return fmt.Sprintf("warnings %q once the autoscaler is within its range, want none", got.Status.Warnings)
		}
		return ""
	})
	if n := gather(t).value("modelserver_autoscalers_at_maximum", nil); n != 0 {
		t.Errorf("modelserver_autoscalers_at_maximum %v once within its range, want 0", n)
	}
}

// writeAutoscalerLimited writes the conditions of an autoscaler that
// scales, at its maximum since a time (limited) or within its range,
// unless it says so already.
func writeAutoscalerLimited(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, since time.Time, limited bool) error {
	if status.AutoscalerLimited(hpa) == limited {
		return nil
	}
	hpa.Status.Conditions = []autoscalingv2.HorizontalPodAutoscalerCondition{
		{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue, Reason: "ReadyForNewScale", LastTransitionTime: metav1.NewTime(since)},
		{Type: autoscalingv2.ScalingActive, Status: corev1.ConditionTrue, Reason: "ValidMetricFound", LastTransitionTime: metav1.NewTime(since)},
		{Type: autoscalingv2.ScalingLimited, Status: corev1.ConditionFalse, Reason: "DesiredWithinRange", LastTransitionTime: metav1.NewTime(since)},
	}
	if limited {
		hpa.Status.Conditions[2].Status, hpa.Status.Conditions[2].Reason = corev1.ConditionTrue, "TooManyReplicas"
	}
	return env.client.Status().Update(ctx, hpa)
}

// createUnmanagedAutoscaled creates, for a reconciler of the test's own, a
// ModelServer autoscaled on CPU between 1 and 3 pods.
func createUnmanagedAutoscaled(t *testing.T, name string) *servingv1alpha1.ModelServer {
	t.Helper()
	return createUnmanaged(t, name, func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Replicas = nil
		ms.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
		ms.Spec.Autoscaling = &servingv1alpha1.Autoscaling{MinReplicas: ptr.To[int32](1), MaxReplicas: 3, TargetCPUUtilizationPercentage: ptr.To[int32](70)}
	})
}

func hpaConditions(hpa *autoscalingv2.HorizontalPodAutoscaler) []string {
	var out []string
	for _, c := range hpa.Status.Conditions {
		out = append(out, string(c.Type)+"="+string(c.Status)+" "+c.Reason)
	}
	return out
}

// TestAnAutoscalerOnTheRequestRateGetsItsMetricAndSaysWhenNoAdapterServesIt:
// spec.autoscaling.metrics reach the autoscaler as written, here a Pods
// metric alone; the local cluster serves no custom metrics API, so the
// autoscaler cannot read it, and the status names the metric.
func TestAnAutoscalerOnTheRequestRateGetsItsMetricAndSaysWhenNoAdapterServesIt(t *testing.T) {
	_, r, _ := recordingReconciler(t)
	perPod := resource.MustParse("50")
	ms := createUnmanaged(t, "byrate", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Replicas = nil
		ms.Spec.Autoscaling = &servingv1alpha1.Autoscaling{MaxReplicas: 3, Metrics: []autoscalingv2.MetricSpec{{
			Type: autoscalingv2.PodsMetricSourceType,
			Pods: &autoscalingv2.PodsMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "tensorflow_serving_requests_per_second"},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &perPod},
			},
		}}}
	})
	c := newClockedReconciler(t, r, ms)
	c.reconcileUntilReady()
	hpa := get(t, ms.Namespace, ms.Name, &autoscalingv2.HorizontalPodAutoscaler{})
	if m := hpa.Spec.Metrics; len(m) != 1 || m[0].Pods == nil || m[0].Pods.Metric.Name != "tensorflow_serving_requests_per_second" || m[0].Pods.Target.AverageValue.Cmp(perPod) != 0 {
		t.Fatalf("the autoscaler's metrics %+v, want the request rate alone", m)
	}

	since := waitScalingInactive(t, ms)
	c.reconcile(since.Add(status.AutoscalerGrace))
	const want = "spec.autoscaling: the autoscaler cannot scale the serving pods (FailedGetPodsMetric): "
	if w := c.get().Status.Warnings; len(w) != 1 || !strings.HasPrefix(w[0], want) || !strings.Contains(w[0], "tensorflow_serving_requests_per_second") {
		t.Errorf("warnings %q, want one: %s… naming the metric", w, want)
	}
}

// waitScalingInactive waits for the autoscaler of ms to say it cannot
// scale, and returns since when.
func waitScalingInactive(t *testing.T, ms *servingv1alpha1.ModelServer) time.Time {
	t.Helper()
	var since time.Time
	eventually(t, 60*time.Second, "the autoscaler says it cannot scale", func(context.Context) (bool, string) {
		hpa := get(t, ms.Namespace, ms.Name, &autoscalingv2.HorizontalPodAutoscaler{})
		for _, cond := range hpa.Status.Conditions {
			if cond.Type == autoscalingv2.ScalingActive && cond.Status == corev1.ConditionFalse {
				since = cond.LastTransitionTime.Time
				return true, ""
			}
		}
		return false, "conditions " + strings.Join(hpaConditions(hpa), ", ")
	})
	return since
}
