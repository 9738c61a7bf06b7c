package status

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// TestARefreshKeepsTheModelServerReady: a refresh round runs, fails, or
// rolls the pods onto what it found, and the ModelServer Ready at this
// generation stays Ready, unless the roll is stuck or short of more pods
// than spec.rollout lets it take down.
func TestARefreshKeepsTheModelServerReady(t *testing.T) {
	round := metav1.NewTime(time.Date(2026, 12, 6, 4, 20, 0, 0, time.UTC))
	next := metav1.NewTime(round.Add(10 * time.Minute))
	model := func(state FetchState, refresh string) ModelFetch {
		return ModelFetch{Name: "resnet", Field: "spec.model", State: state, Refreshing: state != FetchSucceeded,
			Status: servingv1alpha1.ModelStatus{Name: "resnet", FetchedGeneration: "g1", Fetch: string(FetchSucceeded),
				Refresh: &servingv1alpha1.ModelRefresh{Round: round, State: refresh, NextRound: &next}}}
	}
	rolling := func(updated, ready int32) *appsv1.Deployment {
		d := deployment(updated, ready)
		d.Status.Replicas = 3 // one surge pod
		return d
	}
	stuck := withCondition(rolling(1, 2), appsv1.DeploymentCondition{
		Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"})
	readyAt := func(gen int64) servingv1alpha1.ModelServerStatus {
		return servingv1alpha1.ModelServerStatus{Phase: servingv1alpha1.PhaseReady, Conditions: []metav1.Condition{{
			Type: servingv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: servingv1alpha1.ReasonReady, ObservedGeneration: gen}}}
	}
	// Ready at gen while rolling onto what an earlier round found.
	rollingAt := func(gen int64, reason string) servingv1alpha1.ModelServerStatus {
		st := readyAt(gen)
		st.Conditions = append(st.Conditions, metav1.Condition{
			Type: servingv1alpha1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: reason, ObservedGeneration: gen})
		return st
	}
	failed := model(FetchFailed, servingv1alpha1.RefreshFailed)
	failed.Reason, failed.Message = servingv1alpha1.ReasonNotFound, "s3://models/resnet: no objects"
	for _, tc := range []struct {
		name       string
		old        servingv1alpha1.ModelServerStatus
		model      ModelFetch
		deployment *appsv1.Deployment
		ready      bool
		has        string // in the Available condition's message
		warning    string
		rollDown   int32 // spec.rollout.maxUnavailable, resolved
	}{
		{name: "round running", old: readyAt(4), model: model(FetchRunning, servingv1alpha1.RefreshRunning), deployment: deployment(2, 2), ready: true},
		{name: "round failed", old: readyAt(4), model: failed, deployment: deployment(2, 2), ready: true,
			warning: "spec.model.refreshInterval: the refresh round begun at 2026-12-06T04:20:00Z failed (NotFound): s3://models/resnet: no objects; the model fetched before is still served, and the next round is due at 2026-12-06T04:30:00Z"},
		{name: "rolling onto a new model", old: readyAt(4), model: model(FetchSucceeded, servingv1alpha1.RefreshUpdated), deployment: rolling(1, 2), ready: true,
			has: "rolling the pods onto the refreshed model: 1 of 2 updated, 2 ready"},
		{name: "the roll not seen yet", old: readyAt(4), model: model(FetchSucceeded, servingv1alpha1.RefreshUpdated), ready: true,
			deployment: func() *appsv1.Deployment { d := deployment(2, 2); d.Generation++; return d }()},
		{name: "the spec changed too", old: readyAt(3), model: model(FetchSucceeded, servingv1alpha1.RefreshUpdated), deployment: rolling(1, 2), has: "rolling out: 1 of 2 pods updated"},
		{name: "the roll stuck", old: readyAt(4), model: model(FetchSucceeded, servingv1alpha1.RefreshUpdated), deployment: stuck, has: "progress deadline"},
		{name: "a pod short", old: readyAt(4), model: model(FetchSucceeded, servingv1alpha1.RefreshUpdated), deployment: rolling(1, 1)},
		{name: "a pod short, as spec.rollout lets it be", old: readyAt(4), model: model(FetchSucceeded, servingv1alpha1.RefreshUpdated), deployment: rolling(1, 1), rollDown: 1, ready: true,
			has: "rolling the pods onto the refreshed model: 1 of 2 updated, 1 ready"},
		{name: "no pod ready, though spec.rollout lets every pod be down", old: readyAt(4), model: model(FetchSucceeded, servingv1alpha1.RefreshUpdated), deployment: rolling(1, 0), rollDown: 2},
		{name: "no roll after an unchanged round", old: readyAt(4), model: model(FetchSucceeded, servingv1alpha1.RefreshUnchanged), deployment: rolling(1, 2)},
		{name: "the roll goes on while the next round runs", old: rollingAt(4, servingv1alpha1.ReasonRollingOntoRefreshedModel),
			model: model(FetchRunning, servingv1alpha1.RefreshRunning), deployment: rolling(1, 2), ready: true, has: "rolling the pods onto the refreshed model"},
		{name: "the roll goes on past an unchanged round", old: rollingAt(4, servingv1alpha1.ReasonRollingOntoRefreshedModel),
			model: model(FetchSucceeded, servingv1alpha1.RefreshUnchanged), deployment: rolling(1, 2), ready: true, has: "rolling the pods onto the refreshed model"},
		{name: "the roll goes on past a failed round", old: rollingAt(4, servingv1alpha1.ReasonRollingOntoRefreshedModel), model: failed, deployment: rolling(1, 2), ready: true,
			has:     "rolling the pods onto the refreshed model",
			warning: "spec.model.refreshInterval: the refresh round begun at 2026-12-06T04:20:00Z failed (NotFound): s3://models/resnet: no objects; the model fetched before is still served, and the next round is due at 2026-12-06T04:30:00Z"},
		{name: "the roll onto a refresh ended, another began", old: rollingAt(4, servingv1alpha1.ReasonAvailable),
			model: model(FetchRunning, servingv1alpha1.RefreshRunning), deployment: rolling(1, 2), has: "rolling out: 1 of 2 pods updated"},
		{name: "the spec changed while rolling onto a refresh", old: rollingAt(3, servingv1alpha1.ReasonRollingOntoRefreshedModel),
			model: model(FetchRunning, servingv1alpha1.RefreshRunning), deployment: rolling(1, 2), has: "rolling out: 1 of 2 pods updated"},
		{name: "the roll goes on, a pod short", old: rollingAt(4, servingv1alpha1.ReasonRollingOntoRefreshedModel),
			model: model(FetchRunning, servingv1alpha1.RefreshRunning), deployment: rolling(1, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := served(Observation{Deployment: tc.deployment, Source: values.SourceModel, Models: []ModelFetch{tc.model}, RollUnavailable: tc.rollDown})
			o.SummarizeFetches()
			st := Compute(tc.old, o, testNow)
			ready := meta.IsStatusConditionTrue(st.Conditions, servingv1alpha1.ConditionReady)
			available := meta.FindStatusCondition(st.Conditions, servingv1alpha1.ConditionAvailable)
			if ready != tc.ready || (tc.ready && st.Phase != servingv1alpha1.PhaseReady) {
				t.Errorf("Ready %v in phase %s (%s), want %v", ready, st.Phase, available.Message, tc.ready)
			}
			if !meta.IsStatusConditionTrue(st.Conditions, servingv1alpha1.ConditionModelFetched) {
				t.Errorf("ModelFetched is not True during a refresh: %+v", meta.FindStatusCondition(st.Conditions, servingv1alpha1.ConditionModelFetched))
			}
			if !strings.Contains(available.Message, tc.has) {
				t.Errorf("Available says %q, want %q in it", available.Message, tc.has)
			}
			if got := strings.Join(st.Warnings, "\n"); got != tc.warning {
				t.Errorf("warnings %q, want %q", got, tc.warning)
			}
		})
	}
}
