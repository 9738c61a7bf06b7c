//go:build !fetchbench_xxh3

package fetch

import (
	"hash"

	"github.com/zeebo/blake3"
)

// newFormat3Hash is format 3's hash, BLAKE3. A build with the tag
// fetchbench_xxh3, which `make bench-fetch` makes beside the fetcher, puts
// a faster hash that is not cryptographic in its place, so that the
// benchmark can show what the choice of BLAKE3 costs. Such a fetcher is
// never shipped.
func newFormat3Hash() hash.Hash { return blake3.New() }
