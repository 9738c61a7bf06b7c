//go:build fetchbench_nohash

package fetch

const skipHash = true
