package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestVerifyTree(t *testing.T) {
	sh := shape{Name: "s", Files: []fileSpec{
		{Path: "1/saved_model.pb", Size: 3 * kib},
		{Path: "1/variables/variables.index", Size: 1},
		{Path: "1/variables/variables.data-00000-of-00001", Size: 5 * kib},
	}}
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, dir string)
		ignore []string
		want   string // a part of the error; "" for none
	}{
		{name: "an exact copy", change: func(*testing.T, string) {}},
		{name: "a record the tool writes beside the model, ignored", change: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, ".manifest.json"), "{}")
		}, ignore: []string{".manifest.json"}},
		{name: "an empty directory", change: func(t *testing.T, dir string) {
			if err := os.Mkdir(filepath.Join(dir, "1", "assets"), 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "a missing file", change: func(t *testing.T, dir string) {
			remove(t, filepath.Join(dir, "1", "variables", "variables.index"))
		}, want: "missing 1/variables/variables.index"},
		{name: "an extra file", change: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "1", "variables", "variables.data-00000-of-00001.partial"), "x")
		}, want: "unexpected 1/variables/variables.data-00000-of-00001.partial"},
		{name: "a file in the wrong directory", change: func(t *testing.T, dir string) {
			if err := os.Rename(filepath.Join(dir, "1", "saved_model.pb"), filepath.Join(dir, "saved_model.pb")); err != nil {
				t.Fatal(err)
			}
		}, want: "missing 1/saved_model.pb"},
		{name: "one byte changed", change: func(t *testing.T, dir string) {
			p := filepath.Join(dir, "1", "saved_model.pb")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 1
			write(t, p, string(b))
		}, want: "1/saved_model.pb is 3072 bytes with sha256"},
		{name: "a truncated file", change: func(t *testing.T, dir string) {
			if err := os.Truncate(filepath.Join(dir, "1", "variables", "variables.data-00000-of-00001"), 4*kib); err != nil {
				t.Fatal(err)
			}
		}, want: "is 4096 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			want := map[string]fileSum{}
			for _, f := range sh.Files {
				sum, err := writeFile(dir, sh.Name, f)
				if err != nil {
					t.Fatal(err)
				}
				want[f.Path] = sum
			}
			tc.change(t, dir)
			err := verifyTree(dir, want, tc.ignore...)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Errorf("accepted, want an error with %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("error %q, want one with %q", err, tc.want)
			}
		})
	}
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func remove(t *testing.T, p string) {
	t.Helper()
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
}
