package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"syscall"
	"text/tabwriter"
)

// report is one results/<date>-fetch.json.
type report struct {
	Date     string        `json:"date"`
	Label    string        `json:"label,omitempty"`
	Machine  machine       `json:"machine"`
	Server   string        `json:"server"`
	Runs     int           `json:"runs"`
	Tools    []*tool       `json:"tools"`
	Settings toolSettings  `json:"settings"`
	Shapes   []shapeResult `json:"shapes"`
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
	Tool       string   `json:"tool"`
	Seconds    summary  `json:"seconds"`
	Durable    summary  `json:"durableSeconds"`
	MiBps      summary  `json:"mibPerSecond"`
	CPUSeconds summary  `json:"cpuSeconds"`
	PeakRSSMiB summary  `json:"peakRssMiB"`
	Samples    []sample `json:"samples"`
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
		Tool:       name,
		Seconds:    pick(func(s sample) float64 { return s.Seconds }),
		Durable:    pick(func(s sample) float64 { return s.DurableSeconds }),
		MiBps:      pick(func(s sample) float64 { return s.MiBps }),
		CPUSeconds: pick(func(s sample) float64 { return s.CPUSeconds }),
		PeakRSSMiB: pick(func(s sample) float64 { return s.PeakRSSMiB }),
		Samples:    samples,
	}
}

type machine struct {
	CPUs       int     `json:"cpus"`
	CPUModel   string  `json:"cpuModel"`
	MemGiB     float64 `json:"memGiB"`
	Kernel     string  `json:"kernel"`
	Go         string  `json:"go"`
	FileSystem string  `json:"fileSystem"`
}

// describeMachine names the machine and the file system of dir, where
// the server's data and every copy are.
func describeMachine(dir string) machine {
	m := machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPUModel = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) == nil {
		m.MemGiB = round(float64(si.Totalram) * float64(si.Unit) / gib)
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) == nil {
		m.FileSystem = fileSystemName(st.Type)
	}
	return m
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

// printTable shows, for each shape and tool, the median and best of the
// measures.
func printTable(w io.Writer, r *report) {
	_, _ = fmt.Fprintf(w, "%d runs each; %d CPUs (%s), %s, %s\n", r.Runs, r.Machine.CPUs, r.Machine.CPUModel, r.Machine.FileSystem, r.Server)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	_, _ = fmt.Fprintln(tw, "shape\ttool\tmedian s\tmin s\tmedian MiB/s\tbest MiB/s\tmedian s to disk\tmedian CPU s\tmedian RSS MiB\tmax RSS MiB\t")
	for _, sh := range r.Shapes {
		for _, t := range sh.Results {
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%.0f\t%.0f\t%.2f\t%.2f\t%.0f\t%.0f\t\n", sh.Name, t.Tool,
				t.Seconds.Median, t.Seconds.Min, t.MiBps.Median, t.MiBps.Max, t.Durable.Median, t.CPUSeconds.Median, t.PeakRSSMiB.Median, t.PeakRSSMiB.Max)
		}
	}
	_ = tw.Flush()
	for _, t := range r.Tools {
		_, _ = fmt.Fprintf(w, "%s (%s): %s; verifies %s\n", t.Name, t.Version, strings.Join(t.Settings, " "), t.Verifies)
	}
}
