package fetch

import "testing"

// TestTheShippedFetcherHashesAndFlushes: the build tags that leave the hash
// or the flush out exist for the fetch benchmark alone; a fetcher built
// without them must do both.
func TestTheShippedFetcherHashesAndFlushes(t *testing.T) {
	if skipHash {
		t.Error("this build hashes nothing (tag fetchbench_nohash): its manifests cannot be checked")
	}
	if skipFlush {
		t.Error("this build does not flush the model before publishing it (tag fetchbench_noflush)")
	}
}
