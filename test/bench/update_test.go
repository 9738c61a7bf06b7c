package main

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
)

func object(kind, name string, data map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": kind, "metadata": map[string]any{"name": name}}}
	for k, v := range data {
		u.Object[k] = v
	}
	return u
}

func TestTheFloorWritesOnlyWhatTheNewModelChanges(t *testing.T) {
	before := []*unstructured.Unstructured{
		object("ConfigMap", "m", map[string]any{"data": map[string]any{"base": "/models/g1"}}),
		object("Service", "m", map[string]any{"spec": map[string]any{"ports": []any{int64(8501)}}}),
		object("Deployment", "m", map[string]any{"spec": map[string]any{"template": "g1"}}),
		object("Job", "m-fetch-g1", nil),
	}
	after := []*unstructured.Unstructured{
		object("ConfigMap", "m", map[string]any{"data": map[string]any{"base": "/models/g2"}}),
		object("Service", "m", map[string]any{"spec": map[string]any{"ports": []any{int64(8501)}}}),
		object("Deployment", "m", map[string]any{"spec": map[string]any{"template": "g2"}}),
		object("Job", "m-fetch-g2", nil),
	}
	var got []string
	for _, ch := range changes(before, after) {
		got = append(got, ch.verb+" "+ch.obj.GetKind()+"/"+ch.obj.GetName())
	}
	want := "patch ConfigMap/m, patch Deployment/m, create Job/m-fetch-g2, delete Job/m-fetch-g1"
	if strings.Join(got, ", ") != want {
		t.Errorf("changes = %s\nwant      %s", strings.Join(got, ", "), want)
	}
	if n := len(changes(after, after)); n != 0 {
		t.Errorf("%d changes between the same objects, want none", n)
	}
}

func deployment(observed int64, replicas, updated, ready int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Generation: 3},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](2)},
		Status: appsv1.DeploymentStatus{
			ObservedGeneration: observed, Replicas: replicas, UpdatedReplicas: updated, ReadyReplicas: ready,
		},
	}
}

func TestARolloutEndsWhenEveryPodIsOfTheNewTemplateAndReady(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    *appsv1.Deployment
		want bool
	}{
		{"done", deployment(3, 2, 2, 2), true},
		{"template not yet seen", deployment(2, 2, 2, 2), false},
		{"an old pod left", deployment(3, 3, 2, 2), false},
		{"a new pod not ready", deployment(3, 2, 2, 1), false},
		{"a new pod not yet made", deployment(3, 2, 1, 2), false},
	} {
		if got := rolledOut(tc.d); got != tc.want {
			t.Errorf("%s: rolledOut = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestTheUpdateCountsTheLastRolloutAndReadyForThePatchedGeneration(t *testing.T) {
	tr := newTracker()
	tr.rolledOut("a", 5)
	tr.readyFor("a", 9)
	if tr.rolled != nil || tr.readyUpdated != nil {
		t.Fatal("the update's maps exist before it started")
	}
	tr.startUpdate(map[string]int64{"a": 2})
	tr.rolledOut("a", 2) // the rollout of before the update
	if tr.count(tr.rolled) != 0 {
		t.Fatal("a rollout of the generation before the update counted")
	}
	tr.rolledOut("a", 3)
	first := tr.rolled["a"]
	tr.rolledOut("a", 3) // the same rollout seen again
	if tr.rolled["a"] != first {
		t.Error("the same rollout, seen again, moved the time")
	}
	tr.rolledOut("a", 4)
	if tr.rolledGen["a"] != 4 || tr.rolled["a"].Before(first) {
		t.Errorf("a later rollout: generation %d at %v, want 4 at or after %v", tr.rolledGen["a"], tr.rolled["a"], first)
	}

	tr.setUpdated("a", 7)
	tr.readyFor("a", 6)
	if tr.count(tr.readyUpdated) != 0 {
		t.Fatal("Ready for the generation before the patch counted")
	}
	tr.readyFor("a", 7)
	tr.readyFor("b", 7) // not patched
	if tr.count(tr.readyUpdated) != 1 {
		t.Errorf("Ready again for %d ModelServers, want 1", tr.count(tr.readyUpdated))
	}
}

func TestTheReportShowsTheUpdateWindowOfEachSystem(t *testing.T) {
	ready := distribution{Count: 2, P50: 4, P90: 5, P99: 5, Max: 5}
	ours := &updateWindow{TimeToRolled: distribution{Count: 2, P50: 3, P90: 4, P99: 4, Max: 4}, AllRolledSeconds: 4.5,
		TimeToReady: &ready, AllReadySeconds: 5.5, operatorLoad: operatorLoad{RequestsPerCR: 12, WritesPerCR: 6}}
	floor := &updateWindow{AllRolledSeconds: 2.25, NotRolled: 1, operatorLoad: operatorLoad{RequestsPerCR: 4, WritesPerCR: 4}}
	r := &report{N: 2, Ours: &operatorRun{Update: ours}, Floor: &floorRun{Update: floor}, Ratios: map[string]float64{}}
	var b strings.Builder
	printRuns(&b, r)
	out := b.String()
	for _, want := range []string{"4/5/5/5", "5.5", "2.25 (1 not rolled)", "12 / 6", "4 / 4"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
}
