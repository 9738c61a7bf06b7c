package main

import (
	"cmp"
	"image/color"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

var (
	oursColor = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	peerColor = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
)

// writePlots writes <base>-ready-cdf.png, the distribution of the time to Ready
// of both operators, and <base>-requests.png, their API requests per
// ModelServer by verb.
func writePlots(r *report, base string) error {
	if r.Ours == nil && r.Peer == nil {
		return nil
	}
	cdf := plot.New()
	cdf.Title.Text = "Time to Ready, N = " + strconv.Itoa(r.N)
	cdf.X.Label.Text = "seconds from create"
	cdf.Y.Label.Text = "fraction of ModelServers Ready"
	cdf.Add(plotter.NewGrid())
	for _, o := range []struct {
		run *operatorRun
		c   color.Color
	}{{r.Ours, oursColor}, {r.Peer, peerColor}} {
		if o.run == nil || len(o.run.readySeconds) == 0 {
			continue
		}
		s := slices.Clone(o.run.readySeconds)
		slices.Sort(s)
		pts := make(plotter.XYs, 0, len(s)+1)
		pts = append(pts, plotter.XY{X: 0, Y: 0})
		for i, v := range s {
			pts = append(pts, plotter.XY{X: v, Y: float64(i+1) / float64(r.N)})
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		line.Color, line.Width = o.c, vg.Points(2)
		cdf.Add(line)
		cdf.Legend.Add(o.run.Name, line)
	}
	cdf.Legend.Top, cdf.Legend.Left = false, false
	cdf.Y.Min, cdf.Y.Max = 0, 1
	if err := cdf.Save(7*vg.Inch, 4.5*vg.Inch, base+"-ready-cdf.png"); err != nil {
		return err
	}

	// Requests per ModelServer by verb, both operators side by side.
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
	return bars.Save(7*vg.Inch, 4.5*vg.Inch, base+"-requests.png")
}

func sortByCount(keys []string, c counts) {
	slices.SortFunc(keys, func(a, b string) int {
		if d := cmp.Compare(c[b], c[a]); d != 0 {
			return d
		}
		return cmp.Compare(a, b)
	})
}
