package main

import (
	"testing"
	"time"
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
