package localcluster

import (
	"context"
	"testing"
)

// ForTest starts a cluster for the test and stops it when the test ends,
// printing the components' log tails first if the test failed.
func ForTest(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	c, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("start local cluster: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.LogTails(30))
		}
		c.Stop()
	})
	return c
}
