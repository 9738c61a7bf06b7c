// Package machine describes the machine a benchmark ran on, in the same
// fields in the results of every benchmark (test/bench, test/fetchbench),
// so that a result says which CPU its figures come from, and reads the CPU
// time a process has used of it.
package machine

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
)

// Machine is what a result records of the machine.
type Machine struct {
	CPUs     int     `json:"cpus"`
	CPUModel string  `json:"cpuModel"`
	MemGiB   float64 `json:"memGiB"`
	Kernel   string  `json:"kernel"`
	Go       string  `json:"go"`
}

// Describe reads the machine's CPUs, memory and kernel from /proc, and the
// Go that built the benchmark; what it cannot read stays empty.
func Describe() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPUModel = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		if _, err := fmt.Sscanf(strings.TrimPrefix(strings.SplitN(string(b), "\n", 2)[0], "MemTotal:"), "%g", &kb); err == nil {
			m.MemGiB = math.Round(kb/1024/1024*1000) / 1000
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}
