package controllers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
)

func TestServingAModelIsCountedInTheOperatorMetrics(t *testing.T) {
	ns := newNamespace(t)
	before := gather(t)
	// The simulated fetch pod reports what a real fetch would.
	ms := newModelServer(ns, "metered", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.PodTemplate.Annotations = map[string]string{
			localcluster.AnnotationTerminationMessage: `{"versions":[1],"files":3,"bytes":4096,"digest":"sha256:00","received":5120}`,
		}
		ms.Spec.Monitoring.P99Latency = &metav1.Duration{Duration: 250 * time.Millisecond}
		ms.Spec.Monitoring.Availability = "99.9"
	})
	if err := env.client.Create(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ms)
	after := gather(t)

	for _, c := range []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{"modelserver_modelservers", map[string]string{"phase": "Ready"}, 1},
		{"modelserver_helm_operations_total", map[string]string{"operation": "install", "result": "success"}, 1},
		{"modelserver_helm_operation_duration_seconds", map[string]string{"operation": "install"}, 1},
		{"modelserver_fetch_duration_seconds", map[string]string{"result": "success"}, 1},
		{"modelserver_fetch_bytes_total", nil, 4096},
		{"modelserver_fetch_received_bytes_total", nil, 5120},
		{"modelserver_time_to_ready_seconds", nil, 1},
		{"modelserver_status_phase", map[string]string{"namespace": ns, "name": "metered", "phase": "Ready", "reason": "Ready"}, 1},
		{"modelserver_latency_objective_seconds", map[string]string{"namespace": ns, "name": "metered"}, 0.25},
		{"modelserver_availability_objective_ratio", map[string]string{"namespace": ns, "name": "metered"}, 0.999},
	} {
		if got := after.value(c.name, c.labels) - before.value(c.name, c.labels); got < c.min {
			t.Errorf("%s%v went up by %v, want at least %v", c.name, c.labels, got, c.min)
		}
	}

	// Its own series ends with it, and so would an alert on it.
	if err := env.client.Delete(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	waitAllGone(t, ns, ms.Name)
	eventually(t, 10*time.Second, "no series of the deleted ModelServer", func(context.Context) (bool, string) {
		got := gather(t)
		phase, objective := got.value("modelserver_status_phase", map[string]string{"namespace": ns, "name": "metered"}), got.value("modelserver_latency_objective_seconds", map[string]string{"namespace": ns, "name": "metered"})
		return phase == 0 && objective == 0, fmt.Sprintf("modelserver_status_phase sums to %v, modelserver_latency_objective_seconds to %v", phase, objective)
	})
}

// metricFamilies are the families of controller-runtime's registry, which
// the manager serves on its metrics endpoint.
type metricFamilies map[string]*dto.MetricFamily

func gather(t *testing.T) metricFamilies {
	t.Helper()
	fams, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := metricFamilies{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// value sums the series of a family that carry the given labels: a
// counter's or gauge's value, a histogram's sample count.
func (m metricFamilies) value(name string, labels map[string]string) float64 {
	f, ok := m[name]
	if !ok {
		return 0
	}
	var sum float64
next:
	for _, s := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range s.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case s.Counter != nil:
			sum += s.GetCounter().GetValue()
		case s.Gauge != nil:
			sum += s.GetGauge().GetValue()
		case s.Histogram != nil:
			sum += float64(s.GetHistogram().GetSampleCount())
		}
	}
	return sum
}
