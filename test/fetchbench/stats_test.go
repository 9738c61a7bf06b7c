package main

import (
	"testing"
)

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []float64
		want summary
	}{
		{"none", nil, summary{}},
		{"one", []float64{2.5}, summary{Median: 2.5, Min: 2.5, Max: 2.5}},
		{"odd count, unsorted", []float64{3, 1, 2}, summary{Median: 2, Min: 1, Max: 3}},
		{"even count: the mean of the middle two", []float64{4, 1, 3, 2}, summary{Median: 2.5, Min: 1, Max: 4}},
		{"an outlier moves the max, not the median", []float64{1, 1.1, 1.2, 1.3, 60}, summary{Median: 1.2, Min: 1, Max: 60}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := summarize(tc.in); got != tc.want {
				t.Errorf("summarize(%v) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

func TestSummarizeLeavesItsInputInOrder(t *testing.T) {
	in := []float64{3, 1, 2}
	summarize(in)
	if in[0] != 3 || in[1] != 1 || in[2] != 2 {
		t.Errorf("input reordered: %v", in)
	}
}

func TestMiBPerSecond(t *testing.T) {
	if got := mibPerSecond(256*mib, 2); got != 128 {
		t.Errorf("256 MiB in 2 s = %g MiB/s, want 128", got)
	}
	if got := mibPerSecond(mib, 0); got != 0 {
		t.Errorf("no time = %g MiB/s, want 0", got)
	}
}

func TestRoundTicksAreRoundAndCoverTheAxis(t *testing.T) {
	ticks := roundTicks{}.Ticks(0, 1234)
	if len(ticks) < 4 || len(ticks) > 11 {
		t.Fatalf("%d ticks: %v", len(ticks), ticks)
	}
	for _, tk := range ticks {
		if tk.Value != float64(int(tk.Value/200))*200 {
			t.Errorf("tick %g is not a multiple of 200", tk.Value)
		}
	}
	if small := (roundTicks{}).Ticks(0, 0.7); small[1].Label != "0.1" {
		t.Errorf("ticks on 0..0.7: %v", small)
	}
}
