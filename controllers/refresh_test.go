package controllers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
	"github.com/modelserver-dev/modelserver-operator/internal/names"
)

// TestARefreshRoundRunsBesideTheModelServed: a model refreshed every
// minute is looked at again when its round is due, which nothing watched
// would wake the reconciler for; the round's fetch runs while the
// ModelServer stays Ready, its Helm upgrade is no news, and a round that
// found the model unchanged replaces no pod.
func TestARefreshRoundRunsBesideTheModelServed(t *testing.T) {
	_, r, rec := recordingReconciler(t)
	ms := createUnmanaged(t, "refreshed", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Model.RefreshInterval = &metav1.Duration{Duration: time.Minute}
		ms.Spec.PodTemplate.Annotations = map[string]string{
			localcluster.AnnotationTerminationMessage: `{"versions":[1],"files":4,"bytes":2048,"digest":"sha256:aa"}`}
	})
	c := newClockedReconciler(t, r, ms)
	c.reconcileUntilReady()
	ready := c.get()
	created, m := ready.CreationTimestamp.Time, ready.Status.Model
	if m.Refresh == nil || !m.Refresh.Round.Time.Equal(created) || m.Refresh.NextRound == nil || !m.Refresh.NextRound.Time.Equal(created.Add(time.Minute)) {
		t.Fatalf("refresh %+v of a ModelServer made at %s: want its first round then, the next a minute later", m.Refresh, created)
	}
	first := m.FetchedGeneration
	deployment := get(t, ms.Namespace, ms.Name, &appsv1.Deployment{})
	pods := podNames(t, ms.Namespace, ms.Name)
	events := rec.len()

	// Until the round is due, the reconciler is asked back for it.
	if result := c.reconcile(created.Add(40 * time.Second)); !about(result.RequeueAfter, 20*time.Second) {
		t.Errorf("40 s after the creation: look again in %v, want 20s, when the round is due", result.RequeueAfter)
	}

	// The round is due: a Job of its own, in the background.
	c.reconcile(created.Add(61 * time.Second))
	got := c.get()
	if r := got.Status.Model.Refresh; r == nil || r.State != servingv1alpha1.RefreshRunning || !r.Round.Time.Equal(created.Add(time.Minute)) {
		t.Fatalf("61 s: refresh %+v, want the round begun at 1 min running", r)
	}
	var round string
	for _, j := range fetchJobNames(t, ms) {
		if j != names.FetchJob(ms.Name, first) {
			round = j
		}
	}
	if round == "" {
		t.Fatalf("fetch Jobs %v: want one for the round", fetchJobNames(t, ms))
	}
	assertReady(t, got, "while the round fetches")

	// The round's fetch finds the model the pods serve.
	eventually(t, time.Minute, "the round's end", func(context.Context) (bool, string) {
		c.reconcile(created.Add(62 * time.Second))
		got = c.get()
		assertReady(t, got, "while the round ends")
		return got.Status.Model.Refresh.State == servingv1alpha1.RefreshUnchanged, got.Status.Model.Refresh.State
	})
	if m := got.Status.Model; m.ServedGeneration != first || m.FetchedGeneration == first || names.FetchJob(ms.Name, m.FetchedGeneration) != round {
		t.Errorf("after an unchanged round: fetched %s, served from %s; want the round's fetched, %s served", m.FetchedGeneration, m.ServedGeneration, first)
	}
	if d := get(t, ms.Namespace, ms.Name, &appsv1.Deployment{}); d.Generation != deployment.Generation {
		t.Errorf("the Deployment went from generation %d to %d for an unchanged round", deployment.Generation, d.Generation)
	}
	if now := podNames(t, ms.Namespace, ms.Name); now != pods {
		t.Errorf("serving pods %s became %s", pods, now)
	}
	if news := rec.since(events); len(news) != 0 {
		t.Errorf("an unchanged round is no news, but: %v", news)
	}
}

func assertReady(t *testing.T, ms *servingv1alpha1.ModelServer, when string) {
	t.Helper()
	if !meta.IsStatusConditionTrue(ms.Status.Conditions, servingv1alpha1.ConditionReady) || ms.Status.Phase != servingv1alpha1.PhaseReady {
		t.Fatalf("%s: %s, %q; want Ready throughout", when, ms.Status.Phase, ms.Status.Message)
	}
}

// fetchJobNames are the names of ms's fetch Jobs.
func fetchJobNames(t *testing.T, ms *servingv1alpha1.ModelServer) []string {
	t.Helper()
	list := &batchv1.JobList{}
	if err := env.client.List(context.Background(), list, client.InNamespace(ms.Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, j := range list.Items {
		if strings.HasPrefix(j.Name, ms.Name+"-fetch-") {
			out = append(out, j.Name)
		}
	}
	return out
}
