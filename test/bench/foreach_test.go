package main

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

func TestForEachCallsEveryIndexOnce(t *testing.T) {
	const n = 1000
	var calls [n]atomic.Int32
	if err := forEach(context.Background(), n, 16, func(_ context.Context, i int) error {
		calls[i].Add(1)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := range calls {
		if got := calls[i].Load(); got != 1 {
			t.Fatalf("index %d called %d times", i, got)
		}
	}
}

func TestForEachStopsAtTheFirstError(t *testing.T) {
	broken := errors.New("broken")
	var calls atomic.Int32
	err := forEach(context.Background(), 10_000, 4, func(_ context.Context, i int) error {
		calls.Add(1)
		if i == 10 {
			return broken
		}
		return nil
	})
	if !errors.Is(err, broken) {
		t.Fatalf("got %v, want the error of index 10", err)
	}
	if calls.Load() == 10_000 {
		t.Error("every index was called after one failed")
	}
}
