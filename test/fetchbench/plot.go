package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var toolColors = map[string]color.Color{
	"ours":   color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"s5cmd":  color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	"rclone": color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	// ours without part of its work: paler blues.
	"ours-nohash":  color.RGBA{R: 0x4f, G: 0x9b, B: 0xd9, A: 0xff},
	"ours-noflush": color.RGBA{R: 0x7f, G: 0xb8, B: 0xe6, A: 0xff},
	"ours-bare":    color.RGBA{R: 0xae, G: 0xd4, B: 0xf2, A: 0xff},
	// ours with another hash: a purple.
	"ours-xxh3": color.RGBA{R: 0x75, G: 0x6b, B: 0xb1, A: 0xff},
}

// writePlot draws, for each shape, the tools' median throughput (top row),
// the median CPU time a copy cost the machine, the tool's and the S3
// server's together (second row), the median peak resident set
// (third row), and with -memory-max the peak charge of the tool's cgroup
// (bottom row), each bar labelled with its value. Each shape has its own
// scale: 4 KiB files move far fewer MiB/s than a 1 GiB one.
func writePlot(r *report, path string) error {
	if len(r.Shapes) == 0 {
		return nil
	}
	median := " (median of " + strconv.Itoa(r.Runs) + ")"
	type panel struct {
		title, yLabel string
		value         func(toolResult) float64
	}
	panels := []panel{
		{"throughput", "MiB/s" + median, func(t toolResult) float64 { return t.MiBps.Median }},
		{"CPU, tool + server", "CPU seconds" + median, func(t toolResult) float64 { return t.CPUSeconds.Median + t.ServerCPU.Median }},
		{"memory", "peak RSS, MiB" + median, func(t toolResult) float64 { return t.PeakRSSMiB.Median }},
	}
	if r.MemoryMax > 0 {
		limit := r.memoryLimit()
		panels[0].title += ", limit " + limit
		panels = append(panels, panel{"memory charged, limit " + limit, "cgroup's peak with page cache, MiB" + median, func(t toolResult) float64 { return t.CgroupPeakMiB.Median }})
	}
	rows := make([][]*plot.Plot, len(panels))
	for i, panel := range panels {
		rows[i] = make([]*plot.Plot, len(r.Shapes))
		for j, sh := range r.Shapes {
			p, err := barPlot(sh, panel.yLabel, panel.value)
			if err != nil {
				return err
			}
			p.Title.Text = sh.Name + ": " + panel.title
			rows[i][j] = p
		}
	}
	const w, h = 5 * vg.Inch, 4 * vg.Inch
	img := vgimg.New(vg.Length(len(r.Shapes))*w, vg.Length(len(rows))*h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(rows), Cols: len(r.Shapes), PadX: vg.Points(24), PadY: vg.Points(24),
		PadTop: vg.Points(12), PadBottom: vg.Points(12), PadLeft: vg.Points(12), PadRight: vg.Points(12)}
	canvases := plot.Align(rows, tiles, dc)
	for i := range rows {
		for j, p := range rows[i] {
			p.Draw(canvases[i][j])
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// barPlot has one bar per tool, its height value(result), labelled with
// whole numbers, or two decimals where the tallest bar is below 10.
func barPlot(sh shapeResult, yLabel string, value func(toolResult) float64) (*plot.Plot, error) {
	p := plot.New()
	p.Y.Label.Text = yLabel
	p.Add(plotter.NewGrid())
	names := make([]string, len(sh.Results))
	highest := 0.0
	var labels plotter.XYLabels
	for _, t := range sh.Results {
		highest = max(highest, value(t))
	}
	format := "%.0f"
	if highest < 10 {
		format = "%.2f"
	}
	for i, t := range sh.Results {
		names[i] = t.Tool
		v := value(t)
		b, err := plotter.NewBarChart(plotter.Values{v}, vg.Points(40))
		if err != nil {
			return nil, err
		}
		b.XMin = float64(i)
		b.Color, b.LineStyle.Width = toolColors[t.Tool], 0
		p.Add(b)
		labels.XYs = append(labels.XYs, plotter.XY{X: float64(i), Y: v})
		labels.Labels = append(labels.Labels, fmt.Sprintf(format, v))
	}
	l, err := plotter.NewLabels(labels)
	if err != nil {
		return nil, err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].XAlign = draw.XCenter
		l.TextStyle[i].Font.Size = vg.Points(11)
	}
	l.Offset = vg.Point{Y: vg.Points(4)}
	p.Add(l)
	p.NominalX(names...)
	// Room above the tallest bar for its label.
	p.Y.Min, p.Y.Max = 0, highest*1.15
	p.Y.Tick.Marker = roundTicks{}
	readable(p)
	return p, nil
}

// readable sets type sizes that stay legible when the image is shown at
// the width of a page.
func readable(p *plot.Plot) {
	p.Title.TextStyle.Font.Size = vg.Points(14)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font.Size = vg.Points(12)
		a.Tick.Label.Font.Size = vg.Points(11)
	}
}

// roundTicks labels an axis at a step of 1, 2 or 5 times a power of ten,
// with 4 to 10 labels.
type roundTicks struct{}

func (roundTicks) Ticks(lo, hi float64) []plot.Tick {
	span := hi - lo
	if span <= 0 {
		return []plot.Tick{{Value: lo, Label: strconv.FormatFloat(lo, 'g', 4, 64)}}
	}
	pow := math.Pow(10, math.Floor(math.Log10(span/10)))
	step := 10 * pow
	for _, m := range []float64{1, 2, 5} {
		if span/(m*pow) <= 10 {
			step = m * pow
			break
		}
	}
	var ticks []plot.Tick
	for k := math.Ceil(lo / step); k*step <= hi; k++ {
		v := k * step
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', 6, 64)})
	}
	return ticks
}
