package main

import (
	"slices"
	"testing"
)

func TestEachRoundRunsEveryToolOnce(t *testing.T) {
	for _, o := range roundOrders(5, 11, 7) {
		got := slices.Sorted(slices.Values(o))
		if !slices.Equal(got, []int{0, 1, 2, 3, 4}) {
			t.Fatalf("a round runs %v; want each of the 5 tools once", o)
		}
	}
}

func TestNoToolAlwaysFollowsTheSameOne(t *testing.T) {
	const n, rounds = 5, 11
	var runs []int
	for _, o := range roundOrders(n, rounds, 7) {
		runs = append(runs, o...)
	}
	for tool := range n {
		before := map[int]bool{}
		first := 0
		for i, x := range runs {
			if x != tool {
				continue
			}
			if i%n == 0 {
				first++
			}
			if i > 0 {
				before[runs[i-1]] = true
			}
		}
		if len(before) < 2 {
			t.Errorf("tool %d ran after only %v in %d rounds", tool, before, rounds)
		}
		if first == rounds {
			t.Errorf("tool %d started every round", tool)
		}
	}
}

func TestTheSameSeedRepeatsTheOrder(t *testing.T) {
	a, b := roundOrders(4, 6, 42), roundOrders(4, 6, 42)
	for i := range a {
		if !slices.Equal(a[i], b[i]) {
			t.Fatalf("round %d: %v, then %v with the same seed", i, a[i], b[i])
		}
	}
}
