package main

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
	"github.com/modelserver-dev/modelserver-operator/test/machine"
)

// peakRSSMiB is the process's high-water resident set size (VmHWM).
func peakRSSMiB(pid int) (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }() // read only
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

// controlPlanePeakRSSMiB is the high-water RSS of each of the cluster's
// processes. Each run has a cluster of its own, so it is that run's peak.
func controlPlanePeakRSSMiB(c *localcluster.Cluster) map[string]float64 {
	out := map[string]float64{}
	for name, pid := range c.Pids() {
		if mib, err := peakRSSMiB(pid); err == nil {
			out[name] = round(mib)
		}
	}
	return out
}

// loadAverage is the 1-minute load average: how busy other work kept the
// machine while the run was going on.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	v, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	return v
}

// cpuMeter reads the CPU seconds the control plane (the cluster's own
// processes, localcluster.Binaries) has used since it was made.
type cpuMeter struct {
	pids  map[string]int
	start map[string]float64
}

func newCPUMeter(c *localcluster.Cluster) *cpuMeter {
	m := &cpuMeter{pids: c.Pids()}
	m.pids[harness] = os.Getpid()
	m.start = m.read()
	return m
}

func (m *cpuMeter) read() map[string]float64 {
	out := map[string]float64{}
	for _, name := range append(slices.Clone(localcluster.Binaries), harness) {
		if pid, ok := m.pids[name]; ok {
			if s, err := machine.ProcessCPUSeconds(pid); err == nil {
				out[name] = s
			}
		}
	}
	return out
}

// cpuColumns are the names of a cpuMeter's figures, in the order the
// report prints them.
func cpuColumns() []string {
	return append(slices.Clone(localcluster.Binaries), "total", harness)
}

// harness is this process in a cpuMeter's figures: the clients that
// create and watch, and for the floor everything the operator would do.
// It is not part of the control plane's total.
const harness = "harness"

// used returns each component's CPU seconds since the meter was made, and
// the control plane's sum under "total".
func (m *cpuMeter) used() map[string]float64 {
	out := map[string]float64{}
	var total float64
	for name, now := range m.read() {
		d := now - m.start[name]
		out[name] = round(d)
		if name != harness {
			total += d
		}
	}
	out["total"] = round(total)
	return out
}
