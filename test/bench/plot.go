package main

import (
	"cmp"
	"image/color"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

var (
	oursColor  = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	peerColor  = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	floorColor = color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 0xff}
)

// writePlots writes <base>-ready-cdf.png, the distribution of the time to
// Ready of both operators and of the floor, and <base>-requests.png, the
// operators' API requests per ModelServer by verb.
func writePlots(r *report, base string) error {
	if r.Ours == nil && r.Peer == nil && r.Floor == nil {
		return nil
	}
	if err := writeReadyCDF(r, base+"-ready-cdf.png"); err != nil {
		return err
	}
	if r.Ours == nil && r.Peer == nil {
		return nil // the floor makes no requests but its creates
	}
	return writeRequestBars(r, base+"-requests.png")
}

// writeReadyCDF plots each system's time to Ready as a distribution.
func writeReadyCDF(r *report, file string) error {
	cdf := plot.New()
	cdf.Title.Text = "Time to Ready, N = " + strconv.Itoa(r.N)
	cdf.X.Label.Text = "seconds from create"
	cdf.Y.Label.Text = "fraction of ModelServers Ready"
	cdf.Add(plotter.NewGrid())
	type curve struct {
		name    string
		seconds []float64
		c       color.Color
		dashed  bool
	}
	var curves []curve
	for _, o := range []struct {
		run *operatorRun
		c   color.Color
	}{{r.Ours, oursColor}, {r.Peer, peerColor}} {
		if o.run != nil {
			curves = append(curves, curve{o.run.Name, o.run.readySeconds, o.c, false})
		}
	}
	if r.Floor != nil {
		name := "floor (no operator)"
		if r.Floor.OperatorWrites {
			name = "floor + the operator's writes (no operator)"
		}
		curves = append(curves, curve{name, r.Floor.readySeconds, floorColor, true})
	}
	longest := 0.0
	for _, c := range curves {
		if len(c.seconds) == 0 {
			continue
		}
		s := slices.Clone(c.seconds)
		slices.Sort(s)
		longest = max(longest, s[len(s)-1])
		pts := make(plotter.XYs, 0, len(s)+1)
		pts = append(pts, plotter.XY{X: 0, Y: 0})
		for i, v := range s {
			pts = append(pts, plotter.XY{X: v, Y: float64(i+1) / float64(r.N)})
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		line.Color, line.Width = c.c, vg.Points(2)
		if c.dashed {
			line.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		}
		cdf.Add(line)
		cdf.Legend.Add(c.name, line)
	}
	// The curves rise from bottom left to top right: the top left is free.
	cdf.Legend.Top, cdf.Legend.Left = true, true
	cdf.Legend.XOffs = vg.Points(12)
	cdf.X.Min, cdf.X.Max = 0, longest*1.02
	cdf.Y.Min, cdf.Y.Max = 0, 1
	cdf.X.Tick.Marker = secondsTicks{}
	cdf.Y.Tick.Marker = fractionTicks{}
	readable(cdf)
	return cdf.Save(8*vg.Inch, 5*vg.Inch, file)
}

// writeRequestBars plots the requests per ModelServer by verb, both
// operators side by side.
func writeRequestBars(r *report, file string) error {
	verbs := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	perVerb := func(o *operatorRun) plotter.Values {
		v := make(plotter.Values, len(verbs))
		if o == nil {
			return v
		}
		for k, n := range o.Requests {
			for i, verb := range verbs {
				if len(k) > len(verb) && k[:len(verb)+1] == verb+" " {
					v[i] += float64(n) / float64(r.N)
				}
			}
		}
		return v
	}
	bars := plot.New()
	bars.Title.Text = "API requests per ModelServer until all Ready, N = " + strconv.Itoa(r.N)
	bars.Y.Label.Text = "requests per ModelServer"
	bars.Add(plotter.NewGrid())
	w := vg.Points(14)
	highest := 0.0
	for i, o := range []struct {
		run *operatorRun
		c   color.Color
	}{{r.Ours, oursColor}, {r.Peer, peerColor}} {
		if o.run == nil {
			continue
		}
		vals := perVerb(o.run)
		for _, v := range vals {
			highest = max(highest, v)
		}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return err
		}
		b.Color, b.LineStyle.Width = o.c, 0
		b.Offset = vg.Length(2*i-1) * w / 2
		bars.Add(b)
		bars.Legend.Add(o.run.Name, b)
	}
	bars.Legend.Top = true
	// Room above the tallest bar for the legend.
	bars.Y.Min, bars.Y.Max = 0, highest*1.25
	bars.NominalX(verbs...)
	readable(bars)
	return bars.Save(8*vg.Inch, 5*vg.Inch, file)
}

// readable sets type sizes that stay legible when the image is shown at
// the width of a page.
func readable(p *plot.Plot) {
	p.Title.TextStyle.Font.Size = vg.Points(14)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font.Size = vg.Points(12)
		a.Tick.Label.Font.Size = vg.Points(11)
	}
	p.Legend.TextStyle.Font.Size = vg.Points(11)
}

// secondsTicks labels the time axis at a round step giving 6 to 12
// labels, with unlabelled minor ticks between them, so a reader can read a
// curve's time at any fraction without counting gridlines.
type secondsTicks struct{}

func (secondsTicks) Ticks(lo, hi float64) []plot.Tick {
	step := tickStep(hi - lo)
	var ticks []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi; v += step {
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
		if minor := v + step/2; minor < hi {
			ticks = append(ticks, plot.Tick{Value: minor})
		}
	}
	return ticks
}

// tickStep is the round step (1, 2 or 5 times a power of ten) that cuts
// span into at most 12 parts.
func tickStep(span float64) float64 {
	if span <= 0 {
		return 1
	}
	pow := math.Pow(10, math.Floor(math.Log10(span/12)))
	for _, m := range []float64{1, 2, 5, 10} {
		if span/(m*pow) <= 12 {
			return m * pow
		}
	}
	return 10 * pow
}

// fractionTicks labels the fraction axis every tenth.
type fractionTicks struct{}

func (fractionTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for i := 0; i <= 10; i++ {
		if v := float64(i) / 10; v >= lo && v <= hi {
			ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', 1, 64)})
		}
	}
	return ticks
}

func sortByCount(keys []string, c counts) {
	slices.SortFunc(keys, func(a, b string) int {
		if d := cmp.Compare(c[b], c[a]); d != 0 {
			return d
		}
		return cmp.Compare(a, b)
	})
}
