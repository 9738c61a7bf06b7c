//go:build !fetchbench_nohash

package fetch

// skipHash leaves every byte unhashed. It is true only in a build with the
// tag fetchbench_nohash, which `make bench-fetch` makes beside the fetcher
// so that the benchmark can show what the hash costs. Such a fetcher
// records empty digests; it is never shipped.
const skipHash = false
