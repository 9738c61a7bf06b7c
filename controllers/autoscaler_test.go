package controllers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

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
	ms := createUnmanaged(t, "noscale", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Replicas = nil
		ms.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
		ms.Spec.Autoscaling = &servingv1alpha1.Autoscaling{MinReplicas: ptr.To[int32](1), MaxReplicas: 3, TargetCPUUtilizationPercentage: ptr.To[int32](70)}
	})
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
