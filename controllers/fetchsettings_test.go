package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/controllers"
	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
	"github.com/modelserver-dev/modelserver-operator/internal/names"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// currentFetchJob is the ModelServer's current model-fetch Job.
func currentFetchJob(t *testing.T, ms *servingv1alpha1.ModelServer) *batchv1.Job {
	t.Helper()
	generation := values.FetchGeneration(ms, *ms.Spec.Model)
	return get(t, ms.Namespace, names.FetchJob(ms.Name, generation), &batchv1.Job{})
}

// reconcileUntil reconciles ms with r until its ModelFetched condition
// has the reason, and returns it as it then is.
func reconcileUntil(t *testing.T, r *controllers.ModelServerReconciler, ms *servingv1alpha1.ModelServer, timeout time.Duration, reason string) *servingv1alpha1.ModelServer {
	t.Helper()
	got := &servingv1alpha1.ModelServer{}
	eventually(t, timeout, fmt.Sprintf("%s fetch %s", ms.Name, reason), func(ctx context.Context) (bool, string) {
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ms)}); err != nil {
			return false, err.Error()
		}
		if err := env.client.Get(ctx, client.ObjectKeyFromObject(ms), got); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(got.Status.Conditions, servingv1alpha1.ConditionModelFetched)
		if c == nil {
			return false, "no condition"
		}
		return c.Reason == reason && c.ObservedGeneration == got.Generation, c.Reason + ": " + c.Message
	})
	return got
}

func patchFetch(t *testing.T, ms *servingv1alpha1.ModelServer, fetch *servingv1alpha1.FetchSpec) *servingv1alpha1.ModelServer {
	t.Helper()
	patch := client.MergeFrom(ms.DeepCopy())
	ms.Spec.Fetch = fetch
	if err := env.client.Patch(context.Background(), ms, patch); err != nil {
		t.Fatal(err)
	}
	return ms
}

func memoryLimit(q string) *servingv1alpha1.FetchSpec {
	return &servingv1alpha1.FetchSpec{Resources: &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(q)},
	}}
}

func fetchTimeout(d time.Duration) *servingv1alpha1.FetchSpec {
	return &servingv1alpha1.FetchSpec{Timeout: &metav1.Duration{Duration: d}}
}

// retriedEvent is the FetchRetried Event recorded, "" if none was.
func retriedEvent(rec *recordedEvents) string {
	for _, e := range rec.all() {
		if e.reason == "FetchRetried" {
			return e.kind + ": " + e.note
		}
	}
	return ""
}

// TestAFetchOutOfMemoryIsTriedAgainWithTheMemoryGiven: a fetch pod killed
// for its memory limit fails the fetch with reason OutOfMemory, the limit
// named, not with the tail of its log; a larger spec.fetch limit makes the
// Job again, with it, once.
func TestAFetchOutOfMemoryIsTriedAgainWithTheMemoryGiven(t *testing.T) {
	// Mostly waiting on the Job controller: beside the other waits.
	t.Parallel()
	_, r, rec := recordingReconciler(t)
	failures := map[string]string{"reason": servingv1alpha1.ReasonOutOfMemory}
	before := gather(t).value("modelserver_fetch_failures_total", failures)
	ms := createUnmanaged(t, "fetch-oom", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Fetch = memoryLimit("64Mi")
		ms.Spec.PodTemplate.Annotations = map[string]string{
			localcluster.AnnotationFail:       `{"time":"2026-12-06T07:00:00Z","level":"INFO","msg":"downloaded","bytes":67108864}`,
			localcluster.AnnotationExitCode:   "137",
			localcluster.AnnotationExitReason: "OOMKilled",
		}
	})
	ms = reconcileUntil(t, r, ms, 90*time.Second, servingv1alpha1.ReasonOutOfMemory)
	want := "model fetch failed (OutOfMemory): the fetch container was killed for going over its memory limit, 64Mi; raise spec.fetch.resources.limits.memory, and the fetch is tried again"
	if ms.Status.Phase != servingv1alpha1.PhaseFailed || ms.Status.Message != want {
		t.Errorf("phase %s: %q\nwant Failed: %q", ms.Status.Phase, ms.Status.Message, want)
	}
	failed := currentFetchJob(t, ms)
	if retried := retriedEvent(rec); retried != "" {
		t.Errorf("a fetch retried before its settings changed: %s", retried)
	}

	ms = patchFetch(t, ms, memoryLimit("256Mi"))
	ms = reconcileUntil(t, r, ms, 30*time.Second, servingv1alpha1.ReasonFetching)
	again := currentFetchJob(t, ms)
	if again.UID == failed.UID {
		t.Fatal("the failed Job was not made again")
	}
	if got := again.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]; got.String() != "256Mi" {
		t.Errorf("the Job made again has a memory limit of %s, want 256Mi", got.String())
	}
	if e := retriedEvent(rec); !strings.HasPrefix(e, "Normal: The fetch of model fetch-oom failed (OutOfMemory); spec.fetch has changed since") {
		t.Errorf("FetchRetried Event %q", e)
	}
	// The Job made with the settings asked for fails as the first did, and
	// is left so: another would fail the same way.
	ms = reconcileUntil(t, r, ms, 90*time.Second, servingv1alpha1.ReasonOutOfMemory)
	reconcileAll(t, r, []*servingv1alpha1.ModelServer{ms}, 3)
	if last := currentFetchJob(t, ms); last.UID != again.UID || !strings.Contains(ms.Status.Message, "256Mi") {
		t.Errorf("after its second failure, Job %s (made again: %s): %q", last.UID, again.UID, ms.Status.Message)
	}
	if n := gather(t).value("modelserver_fetch_failures_total", failures) - before; n != 2 {
		t.Errorf("modelserver_fetch_failures_total{reason=OutOfMemory} went up by %v, want 2: a failure per Job", n)
	}
	t.Logf("events:\n%s", rec)
}

// TestAFetchTimeoutAppliesToTheRunningFetchAndEndsIt: spec.fetch.timeout
// is the Job's deadline, which the Job controller keeps: a new one applies
// to the fetch running, in the same Job; a fetch still running at its
// deadline fails with reason Timeout; a longer timeout makes the Job again.
func TestAFetchTimeoutAppliesToTheRunningFetchAndEndsIt(t *testing.T) {
	// Mostly waiting on the Job controller: beside the other waits.
	t.Parallel()
	_, r, rec := recordingReconciler(t)
	ms := createUnmanaged(t, "fetch-slow", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Fetch = fetchTimeout(10 * time.Minute)
		ms.Spec.PodTemplate.Annotations = map[string]string{localcluster.AnnotationKeepRunning: "true"}
	})
	ms = reconcileUntil(t, r, ms, 30*time.Second, servingv1alpha1.ReasonFetching)
	running := currentFetchJob(t, ms)
	if d := running.Spec.ActiveDeadlineSeconds; d == nil || *d != 600 {
		t.Fatalf("the Job's deadline is %v, want 600", d)
	}

	ms = patchFetch(t, ms, fetchTimeout(time.Minute))
	ms = reconcileUntil(t, r, ms, 30*time.Second, servingv1alpha1.ReasonFetching)
	if j := currentFetchJob(t, ms); j.UID != running.UID || *j.Spec.ActiveDeadlineSeconds != 60 {
		t.Fatalf("after the timeout's change: Job %s with deadline %d; want %s with 60", j.UID, *j.Spec.ActiveDeadlineSeconds, running.UID)
	}
	ms = reconcileUntil(t, r, ms, 100*time.Second, servingv1alpha1.ReasonTimeout)
	want := "model fetch failed (Timeout): the fetch did not finish within spec.fetch.timeout, 1m0s, and was stopped; raise it, and the fetch is tried again"
	if ms.Status.Phase != servingv1alpha1.PhaseFailed || ms.Status.Message != want {
		t.Errorf("phase %s: %q\nwant Failed: %q", ms.Status.Phase, ms.Status.Message, want)
	}

	ms = patchFetch(t, ms, fetchTimeout(5*time.Minute))
	ms = reconcileUntil(t, r, ms, 30*time.Second, servingv1alpha1.ReasonFetching)
	again := currentFetchJob(t, ms)
	if again.UID == running.UID || *again.Spec.ActiveDeadlineSeconds != 300 {
		t.Errorf("after a longer timeout: Job %s with deadline %d; want a new one with 300", again.UID, *again.Spec.ActiveDeadlineSeconds)
	}
	if e := retriedEvent(rec); !strings.HasPrefix(e, "Normal: The fetch of model fetch-slow failed (Timeout)") {
		t.Errorf("FetchRetried Event %q", e)
	}
}

// TestChangingSpecFetchOfAServedModelChangesNothingThatRuns: the settings
// are for fetches to come; the finished Job keeps its own, the release
// is not upgraded, no pod is replaced.
func TestChangingSpecFetchOfAServedModelChangesNothingThatRuns(t *testing.T) {
	ns := newNamespace(t)
	ms := newModelServer(ns, "fetch-settings")
	if err := env.client.Create(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	ms = waitReady(t, ms)
	revision, pods, job := latestRevision(t, ns, ms.Name), podNames(t, ns, ms.Name), currentFetchJob(t, ms)

	ms = patchFetch(t, ms, &servingv1alpha1.FetchSpec{Timeout: &metav1.Duration{Duration: 3 * time.Hour}, Resources: memoryLimit("1Gi").Resources})
	ms = waitReady(t, ms)
	time.Sleep(2 * time.Second) // what a reconcile would do late
	if now := latestRevision(t, ns, ms.Name); now != revision {
		t.Errorf("the release went from revision %d to %d", revision, now)
	}
	if now := currentFetchJob(t, ms); now.UID != job.UID || *now.Spec.ActiveDeadlineSeconds != *job.Spec.ActiveDeadlineSeconds {
		t.Errorf("the finished Job %s (deadline %d) became %s (deadline %d)", job.UID, *job.Spec.ActiveDeadlineSeconds, now.UID, *now.Spec.ActiveDeadlineSeconds)
	}
	if now := podNames(t, ns, ms.Name); now != pods {
		t.Errorf("serving pods %s became %s", pods, now)
	}
}

// TestAFetchPodTheQuotaRefusesIsMadeAgainWithTheResourcesGiven: a
// namespace's quota refuses the fetch pod's default memory limit; the
// status says so in the apiserver's words, and spec.fetch.resources within
// the quota makes the Job again, whose pod runs, to Ready.
func TestAFetchPodTheQuotaRefusesIsMadeAgainWithTheResourcesGiven(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "memory"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceLimitsMemory: resource.MustParse("300Mi")}},
	}
	if err := env.client.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}
	ms := newModelServer(ns, "fetch-quota", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Replicas = ptrTo[int32](1)
		ms.Spec.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}
	})
	if err := env.client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	got := &servingv1alpha1.ModelServer{}
	eventually(t, 60*time.Second, "the refused fetch pod in the status", func(ctx context.Context) (bool, string) {
		if err := env.client.Get(ctx, client.ObjectKeyFromObject(ms), got); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(got.Status.Conditions, servingv1alpha1.ConditionModelFetched)
		return c != nil && c.Reason == servingv1alpha1.ReasonFetchPodRejected && strings.Contains(c.Message, "exceeded quota"), got.Status.Message
	})
	t.Logf("%s: %s", got.Status.Phase, got.Status.Message)
	refused := currentFetchJob(t, got)

	got = patchFetch(t, got, memoryLimit("128Mi"))
	got = waitReady(t, got)
	job := currentFetchJob(t, got)
	if job.UID == refused.UID {
		t.Fatal("Ready with the Job whose pod the quota refused")
	}
	if limit := job.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]; limit.String() != "128Mi" {
		t.Errorf("the Job made again has a memory limit of %s, want 128Mi", limit.String())
	}
}

// TestAFetchThatFailedForAReasonARetryMayFixIsTriedAgain: a fetch whose
// pods used up their retries on a store that answers errors is made
// again a minute after it failed, with an Event, the status saying when
// before and how many times after; the reconciler asks to be woken then,
// as nothing it watches changes at that moment.
func TestAFetchThatFailedForAReasonARetryMayFixIsTriedAgain(t *testing.T) {
	// Mostly waiting on the Job controller: beside the other waits.
	t.Parallel()
	_, r, rec := recordingReconciler(t)
	ms := createUnmanaged(t, "fetch-flaky", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.PodTemplate.Annotations = map[string]string{
			localcluster.AnnotationFail:     "FetchFailed: s3://models/fetch-flaky/1/saved_model.pb: HTTP 503 Service Unavailable (gave up after 8 attempts)",
			localcluster.AnnotationExitCode: "1",
		}
	})
	c := newClockedReconciler(t, r, ms)
	var got *servingv1alpha1.ModelServer
	var result ctrl.Result
	var at time.Time // of the last reconcile, whose clock the requeue counts from
	eventually(t, 90*time.Second, "the fetch failed", func(context.Context) (bool, string) {
		at = time.Now()
		result = c.reconcile(at)
		got = c.get()
		return got.Status.Phase == servingv1alpha1.PhaseFailed, string(got.Status.Phase) + ": " + got.Status.Message
	})
	failed := currentFetchJob(t, got)
	retry := got.Status.Model.Retry
	if retry == nil || retry.Attempts != 0 || retry.NextAttempt == nil {
		t.Fatalf("status.model.retry %+v; want the first attempt due", retry)
	}
	due := retry.NextAttempt.Time
	if !strings.HasSuffix(got.Status.Message, "; it is tried again at "+due.UTC().Format(time.RFC3339)) {
		t.Errorf("message %q does not say when the fetch is tried again", got.Status.Message)
	}
	if wait := due.Sub(at); !about(result.RequeueAfter, wait) && result.RequeueAfter > wait+time.Second {
		t.Errorf("look again in %v; want by the retry, in %v", result.RequeueAfter, wait)
	}

	c.reconcile(due.Add(time.Second))
	again := currentFetchJob(t, c.get())
	if again.UID == failed.UID {
		t.Fatal("the failed Job was not made again when its retry was due")
	}
	if retry = c.get().Status.Model.Retry; retry == nil || retry.Attempts != 1 || retry.NextAttempt != nil {
		t.Errorf("status.model.retry %+v; want 1 attempt, none due", retry)
	}
	if e := retriedEvent(rec); !strings.HasPrefix(e, "Normal: The fetch of model fetch-flaky failed (FetchFailed), for a reason a retry may fix; it is tried again (retry 1)") {
		t.Errorf("FetchRetried Event %q", e)
	}
}

// TestAFetchRefusedItsCredentialsIsTriedAgainOnceTheSecretIsMended: a
// fetch the store refused (AccessDenied) looks at its credentials Secret
// again every minute; mended in place, the Secret makes the Job again,
// with a FetchRetried Event that names it. Until then, nothing is.
func TestAFetchRefusedItsCredentialsIsTriedAgainOnceTheSecretIsMended(t *testing.T) {
	t.Parallel()
	ns, r, rec := recordingReconciler(t)
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "refused-keys"},
		StringData: map[string]string{"AWS_ACCESS_KEY_ID": "AKIAOLD", "AWS_SECRET_ACCESS_KEY": "old"}}
	if err := env.client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.client.Delete(context.Background(), secret) })
	ms := createUnmanaged(t, "fetch-refused", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Model.CredentialsSecret = secret.Name
		ms.Spec.PodTemplate.Annotations = map[string]string{
			localcluster.AnnotationFail:     "AccessDenied: s3://models/fetch-refused/: access denied: InvalidAccessKeyId; check the keys in the credentials Secret",
			localcluster.AnnotationExitCode: "3",
		}
	})
	got := reconcileUntil(t, r, ms, 90*time.Second, servingv1alpha1.ReasonAccessDenied)
	failed := currentFetchJob(t, got)
	result, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ms)})
	if err != nil {
		t.Fatal(err)
	}
	if result.RequeueAfter <= 0 || result.RequeueAfter > time.Minute {
		t.Errorf("look again in %v; want within a minute, for the Secret", result.RequeueAfter)
	}
	if again := currentFetchJob(t, got); again.UID != failed.UID || retriedEvent(rec) != "" {
		t.Fatalf("the refused fetch was made again before its Secret changed: %s", retriedEvent(rec))
	}

	// Managed fields are stamped to the second: mend it in a later one
	// than the failure's.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1100 * time.Millisecond)))
	secret.StringData = map[string]string{"AWS_ACCESS_KEY_ID": "AKIANEW", "AWS_SECRET_ACCESS_KEY": "new"}
	if err := env.client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ms)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the Job made again", func(ctx context.Context) (bool, string) {
		again := &batchv1.Job{}
		err := env.client.Get(ctx, client.ObjectKeyFromObject(failed), again)
		return err == nil && again.UID != failed.UID, fmt.Sprint(err)
	})
	if e := retriedEvent(rec); e != "Normal: The fetch of model fetch-refused failed (AccessDenied); its credentials Secret refused-keys has changed since, so it is tried again." {
		t.Errorf("FetchRetried Event %q", e)
	}
}
