package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/modelserver-dev/modelserver-operator/test/machine"
)

// report is one results/<date>-fetch.json.
type report struct {
	Date    string `json:"date"`
	Label   string `json:"label,omitempty"`
	Machine host   `json:"machine"`
	Server  string `json:"server"`
	Runs    int    `json:"runs"`
	// MemoryMax is the memory limit of each tool's cgroup, in bytes; 0:
	// none.
	MemoryMax int64        `json:"memoryMaxBytes,omitempty"`
	Tools     []*tool      `json:"tools"`
	Settings  toolSettings `json:"settings"`
	// OrderSeed seeds the shuffle of each round's order (-order-seed).
	OrderSeed uint64        `json:"orderSeed"`
	Shapes    []shapeResult `json:"shapes"`
}

type shapeResult struct {
	Name    string       `json:"name"`
	About   string       `json:"about"`
	Files   int          `json:"files"`
	Bytes   int64        `json:"bytes"`
	Results []toolResult `json:"results"`
}

// toolResult is a tool's runs on a shape: the median and extremes of each
// measure. Throughput's best is its max, every other measure's its min.
type toolResult struct {
	Tool       string  `json:"tool"`
	Seconds    summary `json:"seconds"`
	Durable    summary `json:"durableSeconds"`
	MiBps      summary `json:"mibPerSecond"`
	CPUSeconds summary `json:"cpuSeconds"`
	ServerCPU  summary `json:"serverCpuSeconds"`
	PeakRSSMiB summary `json:"peakRssMiB"`
	// CgroupPeakMiB is the peak charge of the tool's cgroup (-memory-max).
	CgroupPeakMiB summary  `json:"cgroupPeakMiB"`
	Samples       []sample `json:"samples"`
}

func resultOf(name string, samples []sample) toolResult {
	pick := func(f func(sample) float64) summary {
		vs := make([]float64, len(samples))
		for i, s := range samples {
			vs[i] = f(s)
		}
		return summarize(vs)
	}
	return toolResult{
		Tool:          name,
		Seconds:       pick(func(s sample) float64 { return s.Seconds }),
		Durable:       pick(func(s sample) float64 { return s.DurableSeconds }),
		MiBps:         pick(func(s sample) float64 { return s.MiBps }),
		CPUSeconds:    pick(func(s sample) float64 { return s.CPUSeconds }),
		ServerCPU:     pick(func(s sample) float64 { return s.ServerCPU }),
		PeakRSSMiB:    pick(func(s sample) float64 { return s.PeakRSSMiB }),
		CgroupPeakMiB: pick(func(s sample) float64 { return s.CgroupPeakMiB }),
		Samples:       samples,
	}
}

// host is the machine, and the file system of the directory where the
// server's data and every copy are.
type host struct {
	machine.Machine
	FileSystem string `json:"fileSystem"`
}

func describeHost(dir string) host {
	h := host{Machine: machine.Describe()}
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) == nil {
		h.FileSystem = fileSystemName(st.Type)
	}
	return h
}

func fileSystemName(magic int64) string {
	switch magic {
	case 0xef53:
		return "ext4"
	case 0x58465342:
		return "xfs"
	case 0x9123683e:
		return "btrfs"
	case 0x01021994:
		return "tmpfs"
	case 0x794c7630:
		return "overlayfs"
	}
	return fmt.Sprintf("0x%x", magic)
}

func writeJSON(r *report, path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// memoryLimit is MemoryMax as the table and the plot show it.
func (r *report) memoryLimit() string {
	return fmt.Sprintf("%.0f MiB", float64(r.MemoryMax)/mib)
}

// printTable shows, for each shape and tool, the median and best of the
// measures.
func printTable(w io.Writer, r *report) {
	_, _ = fmt.Fprintf(w, "%d runs each; %d CPUs (%s), %s, %s\n", r.Runs, r.Machine.CPUs, r.Machine.CPUModel, r.Machine.FileSystem, r.Server)
	if r.MemoryMax > 0 {
		_, _ = fmt.Fprintf(w, "each tool in a cgroup with a memory limit of %s, page cache included; its peak charge in the last columns\n", r.memoryLimit())
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := "shape\ttool\tmedian s\tmin s\tmedian MiB/s\tbest MiB/s\tmedian s to disk\tmedian CPU s\tmedian server CPU s\tmedian RSS MiB\tmax RSS MiB\t"
	if r.MemoryMax > 0 {
		header += "median cgroup MiB\tmax cgroup MiB\t"
	}
	_, _ = fmt.Fprintln(tw, header)
	for _, sh := range r.Shapes {
		for _, t := range sh.Results {
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%.0f\t%.0f\t%.2f\t%.2f\t%.2f\t%.0f\t%.0f\t", sh.Name, t.Tool,
				t.Seconds.Median, t.Seconds.Min, t.MiBps.Median, t.MiBps.Max, t.Durable.Median, t.CPUSeconds.Median, t.ServerCPU.Median, t.PeakRSSMiB.Median, t.PeakRSSMiB.Max)
			if r.MemoryMax > 0 {
				_, _ = fmt.Fprintf(tw, "%.0f\t%.0f\t", t.CgroupPeakMiB.Median, t.CgroupPeakMiB.Max)
			}
			_, _ = fmt.Fprintln(tw)
		}
	}
	_ = tw.Flush()
	for _, t := range r.Tools {
		_, _ = fmt.Fprintf(w, "%s (%s): %s; verifies %s\n", t.Name, t.Version, strings.Join(t.Settings, " "), t.Verifies)
	}
}
