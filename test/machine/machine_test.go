package machine

import (
	"runtime"
	"testing"
)

func TestDescribeReadsTheMachine(t *testing.T) {
	m := Describe()
	if m.CPUs != runtime.NumCPU() || m.Go != runtime.Version() {
		t.Errorf("CPUs %d, Go %q; want %d, %q", m.CPUs, m.Go, runtime.NumCPU(), runtime.Version())
	}
	if runtime.GOOS != "linux" {
		return
	}
	if m.MemGiB <= 0 || m.Kernel == "" {
		t.Errorf("memory %g GiB, kernel %q: not read from /proc", m.MemGiB, m.Kernel)
	}
}
