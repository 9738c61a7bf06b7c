package controllers_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// TestAPausedModelServerIsReportedButNotChanged: annotated
// serving.modelserver.dev/paused: "true", a Ready ModelServer says so
// (Paused) and stays Ready; a Service deleted by hand is not made again,
// a new model is not fetched and the release is not upgraded, and the
// status says what waits (phase Paused, Deployed and ModelFetched
// ReconcilePaused). The annotation removed, all of it is applied, and the
// ModelServer is Ready at its new generation. One created paused is
// installed only once resumed.
func TestAPausedModelServerIsReportedButNotChanged(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	ms := newModelServer(ns, "held")
	if err := env.client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	ready := waitReady(t, ms)
	revision := ready.Status.Release.Revision

	setPaused(t, ms, "true")
	condition := func(got *servingv1alpha1.ModelServer, t string) metav1.Condition {
		if c := meta.FindStatusCondition(got.Status.Conditions, t); c != nil {
			return *c
		}
		return metav1.Condition{}
	}
	eventually(t, 30*time.Second, "Paused, still Ready", func(ctx context.Context) (bool, string) {
		got := get(t, ns, ms.Name, &servingv1alpha1.ModelServer{})
		p := condition(got, servingv1alpha1.ConditionPaused)
		return p.Status == metav1.ConditionTrue && p.Reason == servingv1alpha1.ReasonReconcilePaused && got.Status.Phase == servingv1alpha1.PhaseReady,
			fmt.Sprintf("phase %s, Paused %v", got.Status.Phase, p)
	})

	pausedAt := condition(get(t, ns, ms.Name, &servingv1alpha1.ModelServer{}), servingv1alpha1.ConditionPaused).LastTransitionTime
	series := map[string]string{"namespace": ns, "name": ms.Name}
	if got := gather(t).value("modelserver_paused_since_seconds", series); got != float64(pausedAt.Unix()) {
		t.Errorf("modelserver_paused_since_seconds %v, want the Paused condition's time %d", got, pausedAt.Unix())
	}

	if err := env.client.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ms.Name}}); err != nil {
		t.Fatal(err)
	}
	if err := env.client.Patch(ctx, &servingv1alpha1.ModelServer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ms.Name}},
		client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"model":{"storageUri":"s3://models/held-v2"}}}`))); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "phase Paused, saying what waits", func(ctx context.Context) (bool, string) {
		got := get(t, ns, ms.Name, &servingv1alpha1.ModelServer{})
		d, f := condition(got, servingv1alpha1.ConditionDeployed), condition(got, servingv1alpha1.ConditionModelFetched)
		return got.Status.Phase == servingv1alpha1.PhasePaused && d.Reason == servingv1alpha1.ReasonReconcilePaused &&
				f.Reason == servingv1alpha1.ReasonReconcilePaused && d.ObservedGeneration == got.Generation &&
				strings.Contains(got.Status.Message, "the release's upgrade (the spec changed) waits for it to resume"),
			fmt.Sprintf("phase %s: %s; Deployed %s: %s", got.Status.Phase, got.Status.Message, d.Reason, d.Message)
	})
	// Nothing of it changes meanwhile.
	time.Sleep(3 * time.Second)
	if err := env.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ms.Name}, &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Service deleted while paused: %v; want it left deleted", err)
	}
	jobs := &batchv1.JobList{}
	if err := env.client.List(ctx, jobs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if n := len(jobs.Items); n != 1 {
		t.Errorf("%d fetch Jobs while paused; want only the first model's", n)
	}
	if got := get(t, ns, ms.Name, &servingv1alpha1.ModelServer{}); got.Status.Release.Revision != revision {
		t.Errorf("release revision %d while paused; want %d", got.Status.Release.Revision, revision)
	}
	if events := modelServerEvents(t, ns); !slices.ContainsFunc(events, func(e string) bool {
		return strings.HasPrefix(e, "Normal ReconcilePaused: Reconciliation paused by the annotation serving.modelserver.dev/paused")
	}) {
		t.Errorf("Events %q; want the pause told", events)
	}

	setPaused(t, ms, "")
	resumed := waitReady(t, ms)
	if got := gather(t).value("modelserver_paused_since_seconds", series); got != 0 {
		t.Errorf("modelserver_paused_since_seconds %v after the ModelServer resumed, want no series", got)
	}
	if _, ok := find(resumed.Status.Conditions, servingv1alpha1.ConditionPaused); ok {
		t.Error("the Paused condition stays after the ModelServer resumed")
	}
	if resumed.Status.Model.FetchedGeneration == ready.Status.Model.FetchedGeneration || resumed.Status.Release.Revision <= revision {
		t.Errorf("resumed: model %+v, release revision %d; want the new model served by a new revision", resumed.Status.Model, resumed.Status.Release.Revision)
	}
	get(t, ns, ms.Name, &corev1.Service{})
	if events := modelServerEvents(t, ns); !slices.ContainsFunc(events, func(e string) bool { return strings.HasPrefix(e, "Normal ReconcileResumed: Reconciliation resumed") }) {
		t.Errorf("Events %q; want the resumption told", events)
	}

	born := newModelServer(ns, "born-paused", func(ms *servingv1alpha1.ModelServer) {
		ms.Annotations = map[string]string{servingv1alpha1.AnnotationPaused: "true"}
	})
	if err := env.client.Create(ctx, born); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "a ModelServer created paused is Paused", func(ctx context.Context) (bool, string) {
		got := get(t, ns, born.Name, &servingv1alpha1.ModelServer{})
		return got.Status.Phase == servingv1alpha1.PhasePaused && strings.Contains(got.Status.Message, "the release's install waits"),
			fmt.Sprintf("phase %s: %s", got.Status.Phase, got.Status.Message)
	})
	if n := len(releaseSecrets(t, ns, born.Name)); n != 0 {
		t.Errorf("%d release records of a ModelServer created paused; want none", n)
	}
	setPaused(t, born, "false")
	waitReady(t, born)
}

// setPaused annotates ms serving.modelserver.dev/paused: value, or
// removes the annotation for "".
func setPaused(t *testing.T, ms *servingv1alpha1.ModelServer, value string) {
	t.Helper()
	v := any(value)
	if value == "" {
		v = nil
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%s}}}`, servingv1alpha1.AnnotationPaused, jsonValue(v))
	if err := env.client.Patch(context.Background(), &servingv1alpha1.ModelServer{ObjectMeta: metav1.ObjectMeta{Namespace: ms.Namespace, Name: ms.Name}},
		client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
}

func jsonValue(v any) string {
	if v == nil {
		return "null"
	}
	return fmt.Sprintf("%q", v)
}

func find(conditions []metav1.Condition, t string) (metav1.Condition, bool) {
	if c := meta.FindStatusCondition(conditions, t); c != nil {
		return *c, true
	}
	return metav1.Condition{}, false
}
