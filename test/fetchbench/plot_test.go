package main

import (
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

// The plot has a column per shape and a row per measure: throughput, CPU,
// memory.
func TestPlotHasAColumnPerShapeAndARowPerMeasure(t *testing.T) {
	r := &report{Runs: 5}
	for _, name := range []string{"64x4MiB", "1x1GiB", "2000x4KiB"} {
		sh := shapeResult{Name: name}
		for k, tool := range []string{"ours", "s5cmd", "rclone"} {
			v := float64(k + 1)
			sh.Results = append(sh.Results, toolResult{
				Tool: tool, MiBps: summary{Median: 100 * v}, CPUSeconds: summary{Median: v},
				ServerCPU: summary{Median: v / 2}, PeakRSSMiB: summary{Median: 20 * v},
			})
		}
		r.Shapes = append(r.Shapes, sh)
	}
	path := filepath.Join(t.TempDir(), "fetch.png")
	if err := writePlot(r, path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	cfg, err := png.DecodeConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	// 5 × 4 inches a panel at the default 96 dots per inch.
	if cfg.Width != 3*5*96 || cfg.Height != 3*4*96 {
		b, _ := json.Marshal(r)
		t.Errorf("the plot is %d × %d pixels, want %d × %d (3 shapes by 3 measures) for %s", cfg.Width, cfg.Height, 3*5*96, 3*4*96, b)
	}
}
