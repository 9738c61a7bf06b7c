package main

import "testing"

func TestParseCPUsTakesQuantitiesAndZeroForNone(t *testing.T) {
	for in, want := range map[string]float64{"1": 1, "500m": 0.5, "250m": 0.25, "2": 2, "0": 0} {
		got, err := parseCPUs("-operator-cpus", in)
		if err != nil || got != want {
			t.Errorf("parseCPUs(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"-1", "one", "", "1 CPU"} {
		if got, err := parseCPUs("-operator-cpus", in); err == nil {
			t.Errorf("parseCPUs(%q) = %v; want an error", in, got)
		}
	}
}
