package main

import "errors"

// runFetch is the entry point of the model-fetch Job. Fetching itself is
// not implemented yet; the Job and its wiring come with the reconciler.
func runFetch(args []string) error {
	return errors.New("fetch: not implemented yet")
}
