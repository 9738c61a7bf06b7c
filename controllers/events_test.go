package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/controllers"
	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
)

func TestEventsReadLikeSentencesAndAreNotRepeatedOnEveryReconcile(t *testing.T) {
	ns, r, rec := recordingReconciler(t)
	ctx := context.Background()

	// A ModelServer whose ConfigMap name is taken by someone else's object:
	// Helm refuses it on every attempt, which must be said once.
	clash := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "evt-clash-config"}}
	if err := env.client.Create(ctx, clash); err != nil {
		t.Fatal(err)
	}
	blocked := newModelServer(ns, "evt-clash")
	if err := env.client.Create(ctx, blocked); err != nil {
		t.Fatal(err)
	}
	reconcileAll(t, r, []*servingv1alpha1.ModelServer{blocked}, 5)
	if n := rec.count("Conflict"); n != 1 {
		t.Errorf("%d Conflict events over 5 reconciles of the same conflict, want 1:\n%s", n, rec)
	}
	if n := rec.count(string(servingv1alpha1.PhaseFailed)); n != 1 {
		t.Errorf("%d Failed phase events over 5 reconciles, want 1:\n%s", n, rec)
	}

	// Once the way is clear it deploys and says so, once per step; idle
	// reconciles after Ready say nothing.
	if err := env.client.Delete(ctx, clash); err != nil {
		t.Fatal(err)
	}
	reconcileUntilReady(t, r, blocked)
	before := rec.len()
	reconcileAll(t, r, []*servingv1alpha1.ModelServer{blocked}, 5)
	if extra := rec.since(before); len(extra) > 0 {
		t.Errorf("5 idle reconciles of a Ready ModelServer emitted events: %v", extra)
	}
	if n := rec.count("Ready"); n != 1 {
		t.Errorf("%d Ready events, want 1:\n%s", n, rec)
	}
	// The first install and the fetch on the way to Ready are in the
	// status; the Ready Event names what was fetched.
	for _, reason := range []string{"Installed", "Fetched"} {
		if n := rec.count(reason); n != 0 {
			t.Errorf("%d %s events on the way to a first Ready, want 0:\n%s", n, reason, rec)
		}
	}
	for _, e := range rec.all() {
		if e.reason == "Ready" && !strings.Contains(e.note, "serving model") {
			t.Errorf("the Ready event does not say what it serves: %q", e.note)
		}
	}
	for _, e := range rec.all() {
		first := []rune(e.note)[0]
		if !unicode.IsUpper(first) || !strings.HasSuffix(e.note, ".") || strings.Contains(e.note, "\n") {
			t.Errorf("%s event is not one sentence: %q", e.reason, e.note)
		}
	}
	t.Logf("events:\n%s", rec)
}

// recordingReconciler is a reconciler of a fresh operator process whose
// Events are kept for the test, and the namespace it is driven in.
func recordingReconciler(t *testing.T) (string, *controllers.ModelServerReconciler, *recordedEvents) {
	t.Helper()
	rec := &recordedEvents{}
	r := newProcessReconciler(t, nil)
	r.Recorder = rec
	return ensureUnmanagedNamespace(t), r, rec
}

// ensureUnmanagedNamespace creates the namespace the suite's manager does
// not watch, for tests that drive a reconciler of their own.
func ensureUnmanagedNamespace(t *testing.T) string {
	t.Helper()
	err := env.client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: unmanagedNamespace}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return unmanagedNamespace
}

// createUnmanaged creates a ModelServer in the namespace the suite's
// manager does not watch, for a test's own reconciler, and deletes it when
// the test ends.
func createUnmanaged(t *testing.T, name string, mutate ...func(*servingv1alpha1.ModelServer)) *servingv1alpha1.ModelServer {
	t.Helper()
	ms := newModelServer(ensureUnmanagedNamespace(t), name, mutate...)
	if err := env.client.Create(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.client.Delete(context.Background(), ms) })
	return ms
}

type recordedEvent struct{ kind, reason, note string }

// recordedEvents is an EventRecorder that keeps what it is given, so a
// test sees every call, not what the broadcaster made of them.
type recordedEvents struct {
	mu     sync.Mutex
	events []recordedEvent
}

var _ events.EventRecorder = (*recordedEvents)(nil)

func (r *recordedEvents) Eventf(_ runtime.Object, _ runtime.Object, kind, reason, _ string, note string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, recordedEvent{kind, reason, fmt.Sprintf(note, args...)})
}

func (r *recordedEvents) all() []recordedEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recordedEvent(nil), r.events...)
}

func (r *recordedEvents) len() int { return len(r.all()) }

func (r *recordedEvents) since(i int) []recordedEvent { return r.all()[i:] }

func (r *recordedEvents) count(reason string) int {
	n := 0
	for _, e := range r.all() {
		if e.reason == reason {
			n++
		}
	}
	return n
}

func (r *recordedEvents) String() string {
	var b strings.Builder
	for _, e := range r.all() {
		fmt.Fprintf(&b, "  %s %s: %s\n", e.kind, e.reason, e.note)
	}
	return b.String()
}

// TestAChangeIsAnnouncedOnceAndItsEndOnce: a model change takes two Helm
// revisions (fetch beside the model served, then switch) and a detour
// through Fetching, an image change a detour through Deploying; the user
// hears of each change twice: the upgrade, why and the step it started,
// then Ready again.
func TestAChangeIsAnnouncedOnceAndItsEndOnce(t *testing.T) {
	ns, r, rec := recordingReconciler(t)
	ctx := context.Background()
	ms := newModelServer(ns, "evt-change")
	if err := env.client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	ms = reconcileUntilReady(t, r, ms)

	for _, change := range []struct {
		what string
		set  func(*servingv1alpha1.ModelServer)
		step string
	}{
		{"model", func(ms *servingv1alpha1.ModelServer) { ms.Spec.Model.StorageURI = "s3://models/evt-change-v2" },
			"the ModelServer is Fetching: fetching the model from s3://models/evt-change-v2 (still serving the previously fetched model)."},
		{"image", func(ms *servingv1alpha1.ModelServer) { ms.Spec.Image = "tensorflow/serving:2.18.0" },
			"the ModelServer is Deploying: "},
	} {
		before, revision := rec.len(), ms.Status.Release.Revision
		patch := client.MergeFrom(ms.DeepCopy())
		change.set(ms)
		if err := env.client.Patch(ctx, ms, patch); err != nil {
			t.Fatal(err)
		}
		ms = reconcileUntilReady(t, r, ms)
		got := rec.since(before)
		if len(got) != 2 || got[0].reason != "Upgraded" || !strings.Contains(got[0].note, "because the spec changed; "+change.step) ||
			got[1].reason != string(servingv1alpha1.PhaseReady) {
			t.Errorf("%s change to revision %d (from %d): events %v; want one Upgraded saying the spec changed and %q, then Ready",
				change.what, ms.Status.Release.Revision, revision, got, change.step)
		}
		t.Logf("%s change:\n%s", change.what, &recordedEvents{events: got})
	}
}

// TestAFirstFetchThatFailsSaysSoAndNothingElse: the release stops its pods
// waiting for a model that will not come, an upgrade the user did not ask
// for and that is no news beside the failure's Warning.
func TestAFirstFetchThatFailsSaysSoAndNothingElse(t *testing.T) {
	ns, r, rec := recordingReconciler(t)
	ctx := context.Background()
	ms := newModelServer(ns, "evt-missing")
	ms.Spec.PodTemplate.Annotations = map[string]string{
		localcluster.AnnotationFail: "NotFound: s3://models/evt-missing: no objects under this prefix", localcluster.AnnotationExitCode: "3",
	}
	if err := env.client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "evt-missing Failed", func(ctx context.Context) (bool, string) {
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ms)}); err != nil {
			return false, err.Error()
		}
		got := &servingv1alpha1.ModelServer{}
		if err := env.client.Get(ctx, client.ObjectKeyFromObject(ms), got); err != nil {
			return false, err.Error()
		}
		return got.Status.Phase == servingv1alpha1.PhaseFailed, string(got.Status.Phase)
	})
	reconcileAll(t, r, []*servingv1alpha1.ModelServer{ms}, 2)
	for _, e := range rec.all() {
		if e.kind != corev1.EventTypeWarning || !strings.Contains(e.note, "no objects under this prefix") {
			t.Errorf("event %s %s: %q; want only Warnings that carry the failure", e.kind, e.reason, e.note)
		}
	}
	t.Logf("release revision %d; events:\n%s", latestRevision(t, ns, ms.Name), rec)
}
