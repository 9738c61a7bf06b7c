package main

import (
	"context"
	"sync"
)

// forEach calls one for 0..n-1 on the given number of workers, and returns
// the first error.
func forEach(ctx context.Context, n, workers int, one func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := one(ctx, i); err != nil {
					cancel(err)
				}
			}
		})
	}
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}
