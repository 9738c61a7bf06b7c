//go:build !fetchbench_noflush

package fetch

// skipFlush leaves the model's writes in the page cache, as s5cmd and
// rclone do: no write-back started early, no flush before the rename. It
// is true only in a build with the tag fetchbench_noflush, which `make
// bench-fetch` makes so that the benchmark can show what durability
// costs. Such a fetcher is never shipped.
const skipFlush = false
