package main

import "testing"

func TestTimeTicksAreRoundAndFewEnoughToRead(t *testing.T) {
	for _, tc := range []struct {
		span, step float64
	}{{3, 0.5}, {12, 1}, {30, 5}, {191, 20}, {292, 50}, {900, 100}} {
		if got := tickStep(tc.span); got != tc.step {
			t.Errorf("tickStep(%g) = %g, want %g", tc.span, got, tc.step)
		}
	}
	labelled := 0
	for _, tk := range (secondsTicks{}).Ticks(0, 191) {
		if tk.Label != "" {
			labelled++
		}
	}
	if labelled < 6 || labelled > 12 {
		t.Errorf("%d labelled ticks over 0–191 s, want 6 to 12", labelled)
	}
	if got := len((fractionTicks{}).Ticks(0, 1)); got != 11 {
		t.Errorf("%d fraction ticks, want 11 (0.0 to 1.0)", got)
	}
}
