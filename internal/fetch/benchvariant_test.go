package fetch

import (
	"bytes"
	"testing"

	"github.com/zeebo/blake3"
)

// TestTheShippedFetcherHashesAndFlushes: the build tags that leave the hash
// or the flush out, or hash with XXH3, exist for the fetch benchmark alone;
// a fetcher built without them must flush and hash with BLAKE3.
func TestTheShippedFetcherHashesAndFlushes(t *testing.T) {
	if skipHash {
		t.Error("this build hashes nothing (tag fetchbench_nohash): its manifests cannot be checked")
	}
	data := []byte("a model's bytes")
	want := blake3.Sum256(data)
	h := newFormatHash(manifestFormat)
	_, _ = h.Write(data)
	if got := h.Sum(nil); !bytes.Equal(got, want[:]) {
		t.Errorf("format %d hashes %q to %x, not its BLAKE3 %x (tag fetchbench_xxh3?)", manifestFormat, data, got, want)
	}
	if skipFlush {
		t.Error("this build does not flush the model before publishing it (tag fetchbench_noflush)")
	}
}
