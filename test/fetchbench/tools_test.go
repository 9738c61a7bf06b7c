package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestModuleVersion(t *testing.T) {
	p := filepath.Join(t.TempDir(), "go.mod")
	write(t, p, "module x\n\ngo 1.26.0\n\nrequire example.com/one v1.2.3\n\nrequire (\n\texample.com/two v0.4.0 // indirect\n\texample.com/two/v2 v2.0.1\n)\n")
	for module, want := range map[string]string{
		"example.com/one":    "v1.2.3",
		"example.com/two":    "v0.4.0",
		"example.com/two/v2": "v2.0.1",
		"example.com/three":  "unknown",
	} {
		if got := moduleVersion(p, module); got != want {
			t.Errorf("moduleVersion(%s) = %s, want %s", module, got, want)
		}
	}
}

func TestSelectTools(t *testing.T) {
	dir := t.TempDir()
	fetcher := filepath.Join(dir, "fetcher")
	write(t, fetcher, "")
	write(t, fetcher+"-bare", "")
	all := newTools(&server{Endpoint: "http://127.0.0.1:1"}, fetcher, dir, dir, defaultToolSettings())

	got, err := selectTools(all, []string{"ours-bare", "ours"}, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "ours" || got[1].Name != "ours-bare" {
		t.Fatalf("selected %v, want ours and ours-bare in that order", got)
	}
	if got[1].Binary != fetcher+"-bare" || got[1].Version != "the working tree" {
		t.Errorf("ours-bare: binary %s, version %q", got[1].Binary, got[1].Version)
	}

	if _, err := selectTools(all, []string{"ours-nohash"}, dir); err == nil || !strings.Contains(err.Error(), "make bench-fetch builds it") {
		t.Errorf("a variant not built: err = %v, want one saying make bench-fetch builds it", err)
	}
}

// The Makefile builds the variants and this harness names them: the two
// lists are kept apart (make has no Go to read), so this test keeps them
// equal.
func TestMakeBuildsEveryVariantTheHarnessRuns(t *testing.T) {
	makefile, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	var built []string
	for line := range strings.SplitSeq(string(makefile), "\n") {
		if list, ok := strings.CutPrefix(line, "FETCHBENCH_VARIANTS := "); ok {
			for _, v := range strings.Fields(list) {
				suffix, tags, _ := strings.Cut(v, ":")
				if tags == "" {
					t.Errorf("FETCHBENCH_VARIANTS entry %q has no build tags", v)
				}
				built = append(built, "-"+suffix)
			}
		}
	}
	var run []string
	for _, v := range oursVariants {
		run = append(run, v.suffix)
	}
	slices.Sort(built)
	slices.Sort(run)
	if !slices.Equal(built, run) {
		t.Errorf("the Makefile's FETCHBENCH_VARIANTS build %v, the harness runs %v", built, run)
	}
}
