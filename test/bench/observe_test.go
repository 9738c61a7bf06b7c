package main

import (
	"maps"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestAfterBothStartsFromWhicheverOfServingAndFetchEndedLast(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	tr := newTracker()
	// a: served at 10.4 s, fetch ended in second 7: from serving.
	tr.served["a"], tr.ready["a"] = at(10.4), at(10.5)
	// b: served at 10.4 s, fetch ended in second 12: from the fetch.
	tr.served["b"], tr.ready["b"] = at(10.4), at(15)
	// c: served at 10.4 s, fetch ended in the same second: from serving.
	tr.served["c"], tr.ready["c"] = at(10.4), at(11.4)
	// d: no fetch end known; e: not served yet. Neither counts.
	tr.served["d"], tr.ready["d"] = at(1), at(2)
	tr.ready["e"] = at(3)
	ends := map[string]time.Time{"a": at(7), "b": at(12), "c": at(10), "e": at(1)}

	lags, fetchLast := tr.afterBoth(ends)
	if fetchLast != 1 {
		t.Errorf("fetches that ended last: %d, want 1 (b)", fetchLast)
	}
	got := map[time.Duration]bool{}
	for _, l := range lags {
		got[l.Round(time.Millisecond)] = true
	}
	want := []time.Duration{100 * time.Millisecond, 3 * time.Second, time.Second}
	if len(lags) != len(want) {
		t.Fatalf("lags %v, want %v", lags, want)
	}
	for _, w := range want {
		if !got[w] {
			t.Errorf("lags %v lack %v", lags, w)
		}
	}
}

func TestTheClusterIsDoneWithTheLastOfServingAndFetchEnds(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	tr := newTracker()
	// a's fetch ends last of all; b is served last; c's fetch end is not
	// known, so its later serving does not count.
	tr.served["a"], tr.served["b"], tr.served["c"] = at(5), at(9), at(30)
	ends := map[string]time.Time{"a": at(12), "b": at(3)}
	if got := tr.lastOfBoth(ends); !got.Equal(at(12)) {
		t.Errorf("last of both at %v, want 12 s", got.Sub(t0))
	}
	if got := newTracker().lastOfBoth(ends); !got.IsZero() {
		t.Errorf("with nothing served, last of both at %v, want none", got)
	}
}

func TestStatusWritesAreCountedByTheStepTheyMake(t *testing.T) {
	ms := func(name string, status map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": name}}}
		if status != nil {
			u.Object["status"] = status
		}
		return u
	}
	fetching := map[string]any{"phase": "Fetching", "message": "fetching the model"}
	fetching2 := map[string]any{"phase": "Fetching", "message": "fetching the model, 1 failed attempt retried"}
	ready := map[string]any{"phase": "Ready"}
	peer := func(types ...string) map[string]any {
		var conds []any
		for _, c := range types {
			conds = append(conds, map[string]any{"type": c, "status": "True"})
		}
		return map[string]any{"conditions": conds}
	}
	tr := newTracker()
	for _, w := range [][2]*unstructured.Unstructured{
		{ms("a", nil), ms("a", fetching)},
		{ms("a", fetching), ms("a", fetching2)},
		{ms("a", fetching2), ms("a", ready)},
		{ms("b", fetching), ms("b", ready)},
		{ms("b", ready), ms("b", ready)}, // metadata alone: not a status write
		{ms("p", nil), ms("p", peer("Initialized", "Deployed"))},
	} {
		tr.countStep(w[0], w[1])
	}
	steps, examples := tr.stepCounts()
	want := counts{
		"(none) → Fetching": 1, "Fetching (same phase)": 1, "Fetching → Ready": 2, "(none) → Initialized+Deployed": 1,
	}
	if !maps.Equal(steps, want) {
		t.Errorf("steps %v, want %v", steps, want)
	}
	if ex := examples["Fetching (same phase)"]; len(ex) != 1 || ex[0] != "a: fetching the model, 1 failed attempt retried" {
		t.Errorf("examples %v", examples)
	}
}
