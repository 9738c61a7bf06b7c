package main

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestDeletedNameReadsObjectsAndTombstones(t *testing.T) {
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "bench-0001"}}
	for _, in := range []any{obj, cache.DeletedFinalStateUnknown{Key: "bench/bench-0001", Obj: obj}} {
		if got := deletedName(in); got != "bench-0001" {
			t.Errorf("deletedName(%T) = %q, want bench-0001", in, got)
		}
	}
	if got := deletedName(cache.DeletedFinalStateUnknown{Key: "bench/x"}); got != "" {
		t.Errorf("deletedName of an empty tombstone = %q, want none", got)
	}
}

func TestOnlyOperatorsWaitForReleaseRecords(t *testing.T) {
	has := func(kinds []remainKind) bool {
		for _, k := range kinds {
			if k.selector == "owner=helm" {
				return true
			}
		}
		return false
	}
	if !has(remainKinds(true)) || has(remainKinds(false)) {
		t.Errorf("release records among what must go: with records %v, without %v; want true, false",
			has(remainKinds(true)), has(remainKinds(false)))
	}
}

func TestTheReportShowsTheDeleteWindowOfEachSystem(t *testing.T) {
	ours := &deleteWindow{
		TimeToGone: distribution{Count: 2, P50: 0.01, P90: 0.02, P99: 0.02, Max: 0.02}, AllGoneSeconds: 0.02, AllCleanSeconds: 3.5,
		LastDeletedSeconds: map[string]float64{"Pod": 3.5}, Complete: true,
	}
	floor := &deleteWindow{AllGoneSeconds: 0.01, AllCleanSeconds: 9.25, Left: map[string]int{"Pod": 3}}
	r := &report{N: 2, Ours: &operatorRun{Delete: ours}, Floor: &floorRun{Delete: floor}, Ratios: map[string]float64{}}
	var b strings.Builder
	printRuns(&b, r)
	out := b.String()
	for _, want := range []string{"0.02 / 3.5", "0.01 / 9.25", "map[Pod:3]", "nothing"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	var pods string
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "delete: last Pod gone s") {
			pods = line
		}
	}
	if fields := strings.Fields(pods); len(fields) < 3 || fields[len(fields)-3] != "3.5" || fields[len(fields)-1] != "-" {
		t.Errorf("the Pod row = %q; want ours 3.5 and the floor's -", pods)
	}
}
