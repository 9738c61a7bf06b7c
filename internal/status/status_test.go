package status

import (
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/fetch"
	"github.com/modelserver-dev/modelserver-operator/internal/storageuri"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// testNow is the time the tables compute status at.
var testNow = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

// deployment is a Deployment of 2 desired replicas, so many updated and
// so many ready.
func deployment(updated, ready int32) *appsv1.Deployment {
	const want int32 = 2
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Generation: 3},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(want)},
		Status: appsv1.DeploymentStatus{
			ObservedGeneration: 3, Replicas: updated, UpdatedReplicas: updated, ReadyReplicas: ready,
		},
	}
}

func withCondition(d *appsv1.Deployment, c appsv1.DeploymentCondition) *appsv1.Deployment {
	d.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
	d.Status.Conditions = append(d.Status.Conditions, c)
	return d
}

// A refused pod's name changes at every retry; what the status says of it
// must not, or each retry would be a status write.
func TestARolloutProblemDoesNotNameTheRefusedPod(t *testing.T) {
	refused := func(pod string) string {
		return RolloutProblem(withCondition(deployment(0, 0), appsv1.DeploymentCondition{
			Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue,
			Message: `pods "` + pod + `" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true`,
		}))
	}
	a, b := refused("resnet-7d9f8-x2x8z"), refused("resnet-7d9f8-q9w4k")
	if a != b || strings.Contains(a, "resnet-") || !strings.Contains(a, `violates PodSecurity "restricted:latest"`) {
		t.Errorf("two retries: %q and %q; want one message without the pod's name", a, b)
	}
	if p := RolloutProblem(deployment(1, 1)); p != "" {
		t.Errorf("a Deployment without a failure condition: %q", p)
	}
}

func served(o Observation) Observation {
	o.Generation = 4
	o.DesiredReplicas = 2
	o.Fetch = FetchSucceeded
	o.Serving = true
	o.ReleaseCurrent = true
	o.Release = &servingv1alpha1.ReleaseStatus{Name: "resnet", Revision: 2}
	return o
}

func TestComputeStatus(t *testing.T) {
	for _, tc := range []struct {
		name        string
		old         servingv1alpha1.Phase
		obs         Observation
		phase       servingv1alpha1.Phase
		ready       metav1.ConditionStatus
		reason      map[string]string // condition type → reason
		messageHas  string
		readyColumn string
		why         string // Reason
	}{{
		name: "fresh: fetch running", why: "Fetching",
		obs:   Observation{Generation: 1, DesiredReplicas: 2, Fetch: FetchRunning},
		phase: servingv1alpha1.PhaseFetching, ready: metav1.ConditionFalse,
		reason:      map[string]string{"ModelFetched": servingv1alpha1.ReasonFetching, "Available": servingv1alpha1.ReasonWaitingForFetch},
		readyColumn: "0/2",
	}, {
		name: "fresh: its fetch pod not started", why: "Fetching",
		obs:   Observation{Generation: 1, DesiredReplicas: 1, Fetch: FetchRunning, FetchPodsProblem: "1 fetch pod cannot be scheduled: 0/1 nodes are available"},
		phase: servingv1alpha1.PhaseFetching, ready: metav1.ConditionFalse,
		reason:     map[string]string{"ModelFetched": servingv1alpha1.ReasonFetching},
		messageHas: "1 fetch pod cannot be scheduled: 0/1 nodes are available",
	}, {
		name: "fetch failed on a fresh ModelServer", why: "NotFound",
		obs:   Observation{Generation: 1, DesiredReplicas: 1, Fetch: FetchFailed, FetchReason: "NotFound", FetchMessage: "s3://m/x: no such prefix", ReleaseCurrent: true},
		phase: servingv1alpha1.PhaseFailed, ready: metav1.ConditionFalse,
		reason:     map[string]string{"ModelFetched": "NotFound"},
		messageHas: "s3://m/x: no such prefix",
	}, {
		name: "refetch failed while the old model serves", why: "AccessDenied",
		old: servingv1alpha1.PhaseReady,
		obs: func() Observation {
			o := served(Observation{Deployment: deployment(2, 2)})
			o.Fetch, o.FetchReason = FetchFailed, "AccessDenied"
			return o
		}(),
		phase: servingv1alpha1.PhaseDegraded, ready: metav1.ConditionFalse,
		messageHas: "still serving the previously fetched model",
	}, {
		name: "ready", why: "Ready",
		obs:   served(Observation{Deployment: deployment(2, 2)}),
		phase: servingv1alpha1.PhaseReady, ready: metav1.ConditionTrue,
		reason:      map[string]string{"Deployed": servingv1alpha1.ReasonReleaseDeployed, "Available": servingv1alpha1.ReasonAvailable},
		readyColumn: "2/2",
	}, {
		name: "paused with nothing waiting", why: "Ready",
		obs: func() Observation {
			o := served(Observation{Deployment: deployment(2, 2)})
			o.Paused = true
			return o
		}(),
		phase: servingv1alpha1.PhaseReady, ready: metav1.ConditionTrue,
		reason: map[string]string{"Paused": servingv1alpha1.ReasonReconcilePaused, "Deployed": servingv1alpha1.ReasonReleaseDeployed},
	}, {
		name: "paused with a change of the spec waiting", why: servingv1alpha1.ReasonReconcilePaused,
		old: servingv1alpha1.PhaseReady,
		obs: func() Observation {
			o := served(Observation{Deployment: deployment(2, 2)})
			o.Paused, o.ReleaseCurrent, o.Waiting = true, false, "the release's upgrade (the spec changed)"
			return o
		}(),
		phase: servingv1alpha1.PhasePaused, ready: metav1.ConditionFalse,
		reason:     map[string]string{"Paused": servingv1alpha1.ReasonReconcilePaused, "Deployed": servingv1alpha1.ReasonReconcilePaused, "Available": servingv1alpha1.ReasonAvailable},
		messageHas: "reconciliation is paused: the release's upgrade (the spec changed) waits for it to resume",
	}, {
		name: "paused with a new model's fetch waiting", why: servingv1alpha1.ReasonReconcilePaused,
		old: servingv1alpha1.PhaseReady,
		obs: func() Observation {
			o := served(Observation{Deployment: deployment(2, 2)})
			o.Paused, o.ReleaseCurrent, o.Fetch, o.Waiting = true, false, FetchMissing, "the release's upgrade (the spec changed)"
			return o
		}(),
		phase: servingv1alpha1.PhasePaused, ready: metav1.ConditionFalse,
		reason: map[string]string{"ModelFetched": servingv1alpha1.ReasonReconcilePaused, "Deployed": servingv1alpha1.ReasonReconcilePaused},
	}, {
		name: "paused, its pods lost", why: "PodsNotReady",
		old: servingv1alpha1.PhaseReady,
		obs: func() Observation {
			o := served(Observation{Deployment: deployment(2, 0)})
			o.Paused, o.ReleaseCurrent, o.Waiting = true, false, "the release's upgrade (the spec changed)"
			return o
		}(),
		phase: servingv1alpha1.PhaseDegraded, ready: metav1.ConditionFalse,
		reason: map[string]string{"Paused": servingv1alpha1.ReasonReconcilePaused, "Available": servingv1alpha1.ReasonPodsNotReady},
	}, {
		name: "pods starting", why: "PodsNotReady",
		obs:   served(Observation{Deployment: deployment(2, 1)}),
		phase: servingv1alpha1.PhaseDeploying, ready: metav1.ConditionFalse,
		reason: map[string]string{"Available": servingv1alpha1.ReasonPodsNotReady},
	}, {
		name: "a pod lost after being ready", why: "PodsNotReady",
		old:   servingv1alpha1.PhaseReady,
		obs:   served(Observation{Deployment: deployment(2, 1)}),
		phase: servingv1alpha1.PhaseDegraded, ready: metav1.ConditionFalse,
	}, {
		name: "every pod lost after being ready", why: "PodsNotReady",
		old:   servingv1alpha1.PhaseReady,
		obs:   served(Observation{Deployment: deployment(2, 0)}),
		phase: servingv1alpha1.PhaseDegraded, ready: metav1.ConditionFalse,
		reason:     map[string]string{"Available": servingv1alpha1.ReasonPodsNotReady},
		messageHas: "0 of 2 serving pods ready",
	}, {
		name: "still none ready", why: "PodsNotReady",
		old:   servingv1alpha1.PhaseDegraded,
		obs:   served(Observation{Deployment: deployment(2, 0)}),
		phase: servingv1alpha1.PhaseDegraded, ready: metav1.ConditionFalse,
	}, {
		name: "rolling out", why: "RollingOut",
		old:   servingv1alpha1.PhaseReady,
		obs:   served(Observation{Deployment: deployment(1, 2)}),
		phase: servingv1alpha1.PhaseDeploying, ready: metav1.ConditionFalse,
		reason: map[string]string{"Available": servingv1alpha1.ReasonRollingOut},
	}, {
		name: "scaled in the spec, not yet in the Deployment", why: "RollingOut",
		obs: func() Observation {
			o := served(Observation{Deployment: deployment(2, 2)})
			o.DesiredReplicas = 3
			return o
		}(),
		phase: servingv1alpha1.PhaseDeploying, ready: metav1.ConditionFalse,
		reason: map[string]string{"Available": servingv1alpha1.ReasonRollingOut},
	}, {
		name: "pods the apiserver refuses", why: "RollingOut",
		obs: served(Observation{Deployment: withCondition(deployment(0, 0), appsv1.DeploymentCondition{
			Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate",
			Message: `pods "resnet-7d9f8-x2x8z" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2`,
		})}),
		phase: servingv1alpha1.PhaseDeploying, ready: metav1.ConditionFalse,
		reason:     map[string]string{"Available": servingv1alpha1.ReasonRollingOut},
		messageHas: "rolling out: 0 of 2 pods updated; serving pods cannot be created: exceeded quota: q, requested: pods=1",
	}, {
		name: "a rollout past its progress deadline", why: "PodsNotReady",
		obs: served(Observation{Deployment: withCondition(deployment(2, 0), appsv1.DeploymentCondition{
			Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded",
		})}),
		phase: servingv1alpha1.PhaseDeploying, ready: metav1.ConditionFalse,
		reason:     map[string]string{"Available": servingv1alpha1.ReasonPodsNotReady},
		messageHas: "0 of 2 serving pods ready (readiness probe GET /v1/models/<name>); the rollout made no progress within the Deployment's progress deadline (600 s)",
	}, {
		name: "conflict", why: "Conflict",
		obs:   Observation{Generation: 1, Conflict: true, ReleaseErr: errors.New("Service x exists")},
		phase: servingv1alpha1.PhaseFailed, ready: metav1.ConditionFalse,
		reason: map[string]string{"Deployed": servingv1alpha1.ReasonConflict}, messageHas: "Service x exists",
	}, {
		name: "invalid spec", why: "InvalidSpec",
		obs:   Observation{Generation: 1, BlockedReason: servingv1alpha1.ReasonInvalidSpec, BlockedMessage: "spec.ports: grpc and rest must differ"},
		phase: servingv1alpha1.PhaseFailed, ready: metav1.ConditionFalse,
		reason: map[string]string{"Deployed": servingv1alpha1.ReasonInvalidSpec}, messageHas: "spec.ports",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			st := Compute(servingv1alpha1.ModelServerStatus{Phase: tc.old}, tc.obs, testNow)
			if st.Phase != tc.phase {
				t.Errorf("phase %s, want %s (message %q)", st.Phase, tc.phase, st.Message)
			}
			if c := meta.FindStatusCondition(st.Conditions, "Ready"); c == nil || c.Status != tc.ready {
				t.Errorf("Ready condition %+v, want %s", c, tc.ready)
			}
			for typ, reason := range tc.reason {
				if c := meta.FindStatusCondition(st.Conditions, typ); c == nil || c.Reason != reason {
					t.Errorf("%s condition %+v, want reason %s", typ, c, reason)
				}
			}
			if !strings.Contains(st.Message, tc.messageHas) {
				t.Errorf("message %q lacks %q", st.Message, tc.messageHas)
			}
			if got := Reason(st); got != tc.why {
				t.Errorf("Reason %q, want %q", got, tc.why)
			}
			if tc.readyColumn != "" && st.Ready != tc.readyColumn {
				t.Errorf("ready %q, want %q", st.Ready, tc.readyColumn)
			}
			checkObservedGeneration(t, st, tc.obs.Generation)
		})
	}
}

func checkObservedGeneration(t *testing.T, st servingv1alpha1.ModelServerStatus, gen int64) {
	t.Helper()
	for _, c := range st.Conditions {
		if c.ObservedGeneration != gen {
			t.Errorf("%s observedGeneration %d, want %d", c.Type, c.ObservedGeneration, gen)
		}
	}
}

// autoscaled is a served observation under an autoscaler whose minimum is
// 2 and which has scaled the Deployment to 5, with so many pods updated
// and ready.
func autoscaled(updated, ready int32) Observation {
	o := served(Observation{Deployment: deployment(updated, ready)})
	o.Deployment.Spec.Replicas = ptr.To[int32](5)
	o.DesiredReplicas, o.NeededReplicas = 5, 2
	return o
}

// unseen is o with a change to its Deployment that the Deployment
// controller has not seen yet, an autoscaler's scale if scaledOnly.
func unseen(o Observation, scaledOnly bool) Observation {
	o.Deployment.Generation++
	o.ScaledOnly = scaledOnly
	return o
}

// An autoscaler's scale is capacity: the ModelServer needs its minimum
// ready, and a scale the Deployment controller has not seen yet leaves
// the pods judged by the Deployment's last status.
func TestAvailabilityUnderAnAutoscalerAndChangesNotSeenYet(t *testing.T) {
	for _, tc := range []struct {
		name      string
		obs       Observation
		available bool
		message   string
	}{
		{"scaled up, new pods starting", autoscaled(5, 2), true,
			"2 of 5 serving pods ready, at least 2 needed by spec.autoscaling.minReplicas"},
		{"scaled up, all ready", autoscaled(5, 5), true, "5 of 5 serving pods ready"},
		{"fewer ready than its minimum", autoscaled(5, 1), false,
			"1 of 5 serving pods ready, at least 2 needed by spec.autoscaling.minReplicas (readiness probe"},
		{"a rollout under an autoscaler", func() Observation {
			o := autoscaled(3, 5)
			o.Deployment.Status.Replicas = 7 // the old template's 4 pods are still there
			return o
		}(), false, "rolling out: 3 of 5 pods updated"},
		{"scaled, not seen yet", unseen(autoscaled(2, 2), true), true, "2 of 5 serving pods ready"},
		{"a new pod template, not seen yet", unseen(autoscaled(5, 5), false), false,
			"the Deployment controller has not seen the latest pod template yet"},
		{"not seen yet, without an autoscaler", unseen(served(Observation{Deployment: deployment(2, 2)}), false), false,
			"the Deployment controller has not seen the latest pod template yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := Compute(servingv1alpha1.ModelServerStatus{Phase: servingv1alpha1.PhaseReady}, tc.obs, testNow)
			c := meta.FindStatusCondition(st.Conditions, servingv1alpha1.ConditionAvailable)
			if (c.Status == metav1.ConditionTrue) != tc.available || !strings.Contains(c.Message, tc.message) {
				t.Errorf("Available %s: %q; want available %v, saying %q", c.Status, c.Message, tc.available, tc.message)
			}
			if tc.available && st.Phase != servingv1alpha1.PhaseReady {
				t.Errorf("phase %s with the pods available", st.Phase)
			}
		})
	}
}

func TestComputeStatusKeepsTransitionTimesOfUnchangedConditions(t *testing.T) {
	o := served(Observation{Deployment: deployment(2, 2)})
	first := Compute(servingv1alpha1.ModelServerStatus{}, o, testNow)
	past := metav1.NewTime(first.Conditions[0].LastTransitionTime.Add(-3600e9))
	for i := range first.Conditions {
		first.Conditions[i].LastTransitionTime = past
	}
	second := Compute(first, o, testNow)
	for _, c := range second.Conditions {
		if !c.LastTransitionTime.Equal(&past) {
			t.Errorf("%s transition time moved though its status did not", c.Type)
		}
	}
}

func TestFetchStateAndFailureParsing(t *testing.T) {
	job := func(t batchv1.JobConditionType) *batchv1.Job {
		return &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: t, Status: corev1.ConditionTrue}}}}
	}
	for want, j := range map[FetchState]*batchv1.Job{
		FetchMissing: nil, FetchRunning: {}, FetchSucceeded: job(batchv1.JobComplete), FetchFailed: job(batchv1.JobFailed),
	} {
		if got := FetchStateOf(j); got != want {
			t.Errorf("FetchStateOf = %s, want %s", got, want)
		}
	}
	for _, tc := range []struct{ termination, job, reason, msg string }{
		{"NotFound: s3://b/p: no objects\nstack...", "", "NotFound", "s3://b/p: no objects"},
		{"panic: runtime error", "", servingv1alpha1.ReasonFetchFailed, "panic: runtime error"},
		{"", "BackoffLimitExceeded: Job has reached the specified backoff limit", servingv1alpha1.ReasonFetchFailed, "BackoffLimitExceeded: Job has reached the specified backoff limit"},
	} {
		reason, msg := fetch.ParseFailure(tc.termination, tc.job)
		if reason != tc.reason || msg != tc.msg {
			t.Errorf("ParseFailure(%q) = %q, %q; want %q, %q", tc.termination, reason, msg, tc.reason, tc.msg)
		}
	}
}

func TestAFetchPodsSuccessCountsBeforeTheJobSaysSo(t *testing.T) {
	const summary = `{"versions":[1,2],"files":4,"bytes":2048,"digest":"sha256:ab","image":"r.example/m@sha256:ef","received":2300}`
	running := &batchv1.Job{Status: batchv1.JobStatus{Active: 1}}
	failed := &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "DeadlineExceeded", Message: "Job was active longer than specified deadline"},
	}}}
	m := values.SpecModel{ModelSpec: servingv1alpha1.ModelSpec{Name: "resnet"}, Generation: "g1", FetchJob: "resnet-fetch-g1"}
	for _, tc := range []struct {
		name  string
		fj    *FetchJob
		state FetchState
	}{
		{"running, pod not done", &FetchJob{Job: running}, FetchRunning},
		{"running, pod succeeded", &FetchJob{Job: running, PodSucceeded: true, Termination: summary}, FetchSucceeded},
		// The Job's own verdict, once it has one, is the one reported.
		{"failed, pod succeeded", &FetchJob{Job: failed, PodSucceeded: true}, FetchFailed},
		{"no Job", nil, FetchMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.fj.State(); got != tc.state {
				t.Fatalf("State() = %s, want %s", got, tc.state)
			}
			mf := modelFetch(m, tc.fj, map[string]servingv1alpha1.ModelStatus{})
			if mf.State != tc.state {
				t.Fatalf("model's state = %s, want %s", mf.State, tc.state)
			}
			if tc.state != FetchSucceeded {
				return
			}
			st := mf.Status
			if !mf.NewlyFetched || st.FetchedGeneration != "g1" || st.Digest != "sha256:ab" || st.SizeBytes != 2048 || len(st.Versions) != 2 || st.ResolvedImage != "r.example/m@sha256:ef" || mf.Received != 2300 {
				t.Errorf("a success seen on the pod must be taken with the pod's summary: newly %v, received %d, %+v", mf.NewlyFetched, mf.Received, st)
			}
		})
	}
}

// TestAFetchOfTheSameModelLeavesThePodsOnTheirCopy: a new generation's
// fetch that found the model the pods serve (the same digest) keeps them
// on their copy, through later identical fetches too; another model moves
// them.
func TestAFetchOfTheSameModelLeavesThePodsOnTheirCopy(t *testing.T) {
	done := func(digest string) *FetchJob {
		return &FetchJob{
			Job:         &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}},
			Termination: `{"versions":[1],"files":4,"bytes":2048,"digest":"` + digest + `"}`,
		}
	}
	model := func(gen string) values.SpecModel {
		return values.SpecModel{ModelSpec: servingv1alpha1.ModelSpec{Name: "resnet"}, Generation: gen, FetchJob: "resnet-fetch-" + gen}
	}
	status := map[string]servingv1alpha1.ModelStatus{"resnet": {Name: "resnet", FetchedGeneration: "g1", Digest: "sha256:aa"}}
	for _, step := range []struct {
		gen, digest, served string
	}{
		{"g2", "sha256:aa", "g1"}, // refetched, unchanged
		{"g2", "sha256:aa", "g1"}, // seen again
		{"g3", "sha256:aa", "g1"}, // refetched again, unchanged
		{"g4", "sha256:bb", "g4"}, // a new model
		{"g5", "sha256:aa", "g5"}, // another: the pods' copy is g4's
	} {
		mf := modelFetch(model(step.gen), done(step.digest), status)
		if got := Served([]ModelFetch{mf})["resnet"]; got != step.served || mf.Status.FetchedGeneration != step.gen {
			t.Fatalf("after %s's fetch of %s: served from %q (fetched %q), want %q", step.gen, step.digest, got, mf.Status.FetchedGeneration, step.served)
		}
		if mf.Received != -1 {
			t.Errorf("received %d by a fetcher whose summary does not say; want -1", mf.Received)
		}
		status["resnet"] = mf.Status
	}
}

func TestRedactURIHidesCredentials(t *testing.T) {
	for in, want := range map[string]string{
		"s3://models/resnet": "s3://models/resnet",
		"https://user:pw@host/m.tgz?X-Amz-Signature=abc#sha256=00": "https://REDACTED@host/m.tgz?X-Amz-Signature=REDACTED#sha256=00",
		"pvc://claim/path": "pvc://claim/path",
	} {
		if got := storageuri.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func one(m ModelFetch) Observation { return Observation{Models: []ModelFetch{m}} }

func TestFetchProgressMessage(t *testing.T) {
	for _, tc := range []struct {
		obs  Observation
		want string
	}{
		{one(ModelFetch{State: FetchRunning, StorageURI: "s3://m/r"}),
			"fetching the model from s3://m/r"},
		{one(ModelFetch{State: FetchRunning, StorageURI: "s3://m/r", Retries: 2}),
			"fetching the model from s3://m/r, 2 failed attempts retried"},
		{one(ModelFetch{State: FetchRunning, StorageURI: "s3://m/r2", Status: servingv1alpha1.ModelStatus{FetchedGeneration: "g1"}}),
			"fetching the model from s3://m/r2 (still serving the previously fetched model)"},
		{one(ModelFetch{State: FetchMissing, StorageURI: "s3://m/r"}), "fetching the model from s3://m/r"},
		{Observation{Source: values.SourceModels, Models: []ModelFetch{
			{Name: "a", State: FetchSucceeded, StorageURI: "s3://m/a"},
			{Name: "b", State: FetchRunning, StorageURI: "s3://m/b"},
			{Name: "c", State: FetchMissing, StorageURI: "gs://m/c"},
		}}, "fetching model b from s3://m/b; fetching model c from gs://m/c"},
		{one(ModelFetch{State: FetchRunning, StorageURI: "s3://m/r", Retries: 1, Status: servingv1alpha1.ModelStatus{Progress: &servingv1alpha1.FetchProgress{
			Bytes: 1288490189, TotalBytes: ptr.To[int64](4 << 30), BytesPerSecond: 38_460_000,
		}}}), "fetching the model from s3://m/r: 1.2 GiB of 4.0 GiB (30%), 38.5 MB/s, 1 failed attempt retried"},
		{one(ModelFetch{State: FetchRunning, StorageURI: "s3://m/r", Left: 40 * time.Second, Status: servingv1alpha1.ModelStatus{Progress: &servingv1alpha1.FetchProgress{
			Bytes: 3 << 30, TotalBytes: ptr.To[int64](4 << 30), BytesPerSecond: 30_000_000,
		}}}), "fetching the model from s3://m/r: 3.0 GiB of 4.0 GiB (75%), 30.0 MB/s, less than a minute left"},
		{one(ModelFetch{State: FetchRunning, StorageURI: "s3://m/r", Left: 130*time.Minute + 20*time.Second, OutOfTime: time.Hour, Status: servingv1alpha1.ModelStatus{Progress: &servingv1alpha1.FetchProgress{
			Bytes: 1 << 30, TotalBytes: ptr.To[int64](50 << 30), BytesPerSecond: 6_500_000,
		}}}), "fetching the model from s3://m/r: 1.0 GiB of 50.0 GiB (2%), 6.5 MB/s, about 2h10m left, past spec.fetch.timeout, 1h0m0s, at this rate; raise it, and the running fetch is given the time"},
		{one(ModelFetch{State: FetchRunning, StorageURI: "s3://m/r", Status: servingv1alpha1.ModelStatus{Progress: &servingv1alpha1.FetchProgress{
			Bytes: 184 << 20, TotalBytes: ptr.To[int64](200 << 20), IdleSeconds: 37,
		}}}), "fetching the model from s3://m/r: 184.0 MiB of 200.0 MiB (92%), nothing received for 37 s"},
		{one(ModelFetch{State: FetchRunning, StorageURI: "s3://m/r", Status: servingv1alpha1.ModelStatus{Progress: &servingv1alpha1.FetchProgress{
			Bytes: 184 << 20, TotalBytes: ptr.To[int64](200 << 20), IdleSeconds: 29,
		}}}), "fetching the model from s3://m/r: 184.0 MiB of 200.0 MiB (92%)"},
		{one(ModelFetch{State: FetchRunning, StorageURI: "s3://m/r.tar.gz", Status: servingv1alpha1.ModelStatus{Progress: &servingv1alpha1.FetchProgress{
			Bytes: 3 << 20,
		}}}), "fetching the model from s3://m/r.tar.gz: 3.0 MiB so far"},
		{Observation{Models: []ModelFetch{{State: FetchRunning, StorageURI: "s3://m/r"}}, FetchPodsProblem: "1 fetch pod cannot be scheduled: 0/1 nodes are available"},
			"fetching the model from s3://m/r; 1 fetch pod cannot be scheduled: 0/1 nodes are available"},
	} {
		if got := fetchProgress(tc.obs); got != tc.want {
			t.Errorf("fetchProgress = %q, want %q", got, tc.want)
		}
	}
}

// TestARunningFetchKeepsItsProgressWhileItsPodRuns: the status says the
// progress read from the log of the pod that runs now, or, between reads,
// what it said of that pod; a new pod's fetch, or an end, clears it.
func TestARunningFetchKeepsItsProgressWhileItsPodRuns(t *testing.T) {
	running := &batchv1.Job{Status: batchv1.JobStatus{Active: 1}}
	complete := &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}}
	logged := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	read := &fetch.Progress{Time: logged, Files: 3, TotalFiles: 8, Bytes: 100, TotalBytes: -1, BytesPerSecond: 5, Idle: 2 * time.Second}
	was := &servingv1alpha1.FetchProgress{Pod: "p1", Time: metav1.NewTime(logged.Add(-time.Minute)), Bytes: 50, Files: 1}
	m := values.SpecModel{ModelSpec: servingv1alpha1.ModelSpec{Name: "resnet"}, Generation: "g1", FetchJob: "resnet-fetch-g1"}
	for _, tc := range []struct {
		name string
		fj   *FetchJob
		want *servingv1alpha1.FetchProgress
	}{
		{"read now", &FetchJob{Job: running, Pod: "p1", Progress: read},
			&servingv1alpha1.FetchProgress{Pod: "p1", Time: metav1.NewTime(logged), Bytes: 100, Files: 3, TotalFiles: ptr.To[int64](8), BytesPerSecond: 5, IdleSeconds: 2}},
		{"between reads", &FetchJob{Job: running, Pod: "p1"}, was},
		{"another pod runs", &FetchJob{Job: running, Pod: "p2"}, nil},
		{"no pod runs", &FetchJob{Job: running}, nil},
		{"refused pods", &FetchJob{Job: running, Pod: "p1", PodRejected: "exceeded quota"}, nil},
		{"ended", &FetchJob{Job: complete, Pod: "p1"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mf := modelFetch(m, tc.fj, map[string]servingv1alpha1.ModelStatus{"resnet": {Name: "resnet", Fetch: string(FetchRunning), Progress: was}})
			if got := mf.Status.Progress; !equality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("progress %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestAFetchsOutlookSaysWhetherItEndsInTime: at the rate it last logged,
// how long a fetch needs yet, and whether its Job's deadline comes first.
func TestAFetchsOutlookSaysWhetherItEndsInTime(t *testing.T) {
	started := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	job := &batchv1.Job{Spec: batchv1.JobSpec{ActiveDeadlineSeconds: ptr.To[int64](3600)}, Status: batchv1.JobStatus{StartTime: &metav1.Time{Time: started}}}
	at := func(after time.Duration, bytes, total, rate int64) *servingv1alpha1.FetchProgress {
		return &servingv1alpha1.FetchProgress{Time: metav1.NewTime(started.Add(after)), Bytes: bytes, TotalBytes: &total, BytesPerSecond: rate}
	}
	const gb = 1_000_000_000
	for _, tc := range []struct {
		name            string
		p               *servingv1alpha1.FetchProgress
		job             *batchv1.Job
		left, outOfTime time.Duration
	}{
		{"in time", at(10*time.Minute, 6*gb, 12*gb, 10_000_000), job, 10 * time.Minute, 0},
		{"just in time", at(30*time.Minute, 0, 18*gb, 10_000_000), job, 30 * time.Minute, 0},
		{"past the deadline", at(30*time.Minute, 0, 18*gb+1, 10_000_000), job, 30*time.Minute + time.Second/10_000_000, time.Hour},
		{"a Job not started", at(0, 0, 100*gb, 10_000_000), &batchv1.Job{Spec: job.Spec}, 10000 * time.Second, 0},
		{"standing still", at(time.Minute, 1, 2, 0), job, 0, 0},
		{"done", at(time.Minute, 2, 2, 5), job, 0, 0},
		{"no total", &servingv1alpha1.FetchProgress{Bytes: 1, BytesPerSecond: 5}, job, 0, 0},
		{"no progress", nil, job, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if left, outOfTime := outlook(tc.p, tc.job); left != tc.left || outOfTime != tc.outOfTime {
				t.Errorf("outlook = %s left, out of time %s; want %s, %s", left, outOfTime, tc.left, tc.outOfTime)
			}
		})
	}
	for d, want := range map[time.Duration]string{
		45 * time.Second: "45 s", 90 * time.Second: "2 min", 59*time.Minute + 31*time.Second: "1h", 3 * time.Hour: "3h", 130 * time.Minute: "2h10m",
	} {
		if got := roughly(d); got != want {
			t.Errorf("roughly(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestSlowFetchSaysWhyARunningFetchIsSlow(t *testing.T) {
	idle := func(s int64) servingv1alpha1.ModelStatus {
		return servingv1alpha1.ModelStatus{Progress: &servingv1alpha1.FetchProgress{IdleSeconds: s}}
	}
	for _, tc := range []struct {
		name   string
		models []ModelFetch
		want   string
	}{
		{"none runs", nil, ""},
		{"moving in time", []ModelFetch{{State: FetchRunning, Left: time.Minute, Status: idle(0)}}, ""},
		{"out of time", []ModelFetch{{State: FetchRunning, Left: time.Hour, OutOfTime: time.Minute}}, SlowFetchOutOfTime},
		{"nothing received for 30 s", []ModelFetch{{State: FetchRunning, Status: idle(30)}}, SlowFetchNothingReceived},
		{"for 29 s", []ModelFetch{{State: FetchRunning, Status: idle(29)}}, ""},
		{"out of time beats idle", []ModelFetch{{State: FetchRunning, Status: idle(40)}, {State: FetchRunning, OutOfTime: time.Minute}}, SlowFetchOutOfTime},
		{"an idle progress of a fetch that ended", []ModelFetch{{State: FetchSucceeded, Status: idle(40)}}, ""},
	} {
		if got := SlowFetch(Observation{Models: tc.models}); got != tc.want {
			t.Errorf("%s: SlowFetch = %q, want %q", tc.name, got, tc.want)
		}
	}
}
