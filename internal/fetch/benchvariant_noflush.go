//go:build fetchbench_noflush

package fetch

const skipFlush = true
