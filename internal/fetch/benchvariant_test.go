package fetch

import (
	"encoding/hex"
	"testing"
)

// TestTheShippedFetcherHashesAndFlushes: the build tags that leave the hash
// or the flush out, or hash with XXH3, exist for the fetch benchmark alone;
// a fetcher built without them must flush and hash with BLAKE3.
func TestTheShippedFetcherHashesAndFlushes(t *testing.T) {
	if skipHash {
		t.Error("this build hashes nothing (tag fetchbench_nohash): its manifests cannot be checked")
	}
	data := []byte("a model's bytes")
	h := newFormatHash(manifestFormat)
	_, _ = h.Write(data)
	if got, want := hex.EncodeToString(h.Sum(nil)), blake3Hex(data); got != want {
		t.Errorf("format %d hashes %q to %s, not its BLAKE3 %s (tag fetchbench_xxh3?)", manifestFormat, data, got, want)
	}
	if skipFlush {
		t.Error("this build does not flush the model before publishing it (tag fetchbench_noflush)")
	}
}
