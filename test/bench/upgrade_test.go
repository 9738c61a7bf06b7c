package main

import "testing"

func TestNextPatchRaisesOnlyThePatchNumber(t *testing.T) {
	for in, want := range map[string]string{"0.1.0": "0.1.1", "1.2.9": "1.2.10"} {
		if got, err := nextPatch(in); err != nil || got != want {
			t.Errorf("nextPatch(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"0.1", "0.1.x", "0.1.0-rc.1"} {
		if got, err := nextPatch(in); err == nil {
			t.Errorf("nextPatch(%q) = %q, want an error", in, got)
		}
	}
}
