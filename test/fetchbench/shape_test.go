package main

import (
	"bytes"
	"compress/flate"
	"io"
	"path"
	"strings"
	"testing"
)

func TestEveryShapeIsAVersionOneSavedModelOfTheSizeItsNameSays(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files int
		bytes int64
	}{
		{"64x4MiB", 64, 64 * 4 * mib},
		{"1x1GiB", 3, gib + 64*kib + 4*kib},
		{"2000x4KiB", 2000, 2000 * 4 * kib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sh := shapeNamed(t, tc.name)
			if len(sh.Files) != tc.files || sh.Bytes() != tc.bytes {
				t.Errorf("%d files of %d bytes, want %d of %d", len(sh.Files), sh.Bytes(), tc.files, tc.bytes)
			}
			seen := map[string]bool{}
			for _, f := range sh.Files {
				if seen[f.Path] {
					t.Errorf("%s twice", f.Path)
				}
				seen[f.Path] = true
				if f.Path != "1/saved_model.pb" && !strings.HasPrefix(f.Path, "1/variables/") {
					t.Errorf("%s is neither the graph nor a variables file", f.Path)
				}
			}
			if !seen["1/saved_model.pb"] || !seen["1/variables/variables.index"] {
				t.Errorf("no saved_model.pb or variables.index: %v", keysOf(seen))
			}
		})
	}
}

func TestContentIsTheSameForAFileAndDiffersBetweenFiles(t *testing.T) {
	a := fileSpec{Path: "1/variables/variables.data-00000-of-00002", Size: 64 * kib}
	b := fileSpec{Path: "1/variables/variables.data-00001-of-00002", Size: 64 * kib}
	read := func(shapeName string, f fileSpec) []byte {
		data, err := io.ReadAll(content(shapeName, f))
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(data)) != f.Size {
			t.Fatalf("%d bytes, want %d", len(data), f.Size)
		}
		return data
	}
	if !bytes.Equal(read("s", a), read("s", a)) {
		t.Error("the same file differs between two reads")
	}
	if bytes.Equal(read("s", a), read("s", b)) {
		t.Error("two files have the same bytes")
	}
	if bytes.Equal(read("s", a), read("t", a)) {
		t.Error("a path has the same bytes in two shapes")
	}
}

func TestContentDoesNotCompress(t *testing.T) {
	data, err := io.ReadAll(content("s", fileSpec{Path: "1/saved_model.pb", Size: 256 * kib}))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	w, _ := flate.NewWriter(&out, flate.BestCompression)
	_, _ = w.Write(data)
	_ = w.Close()
	if out.Len() < len(data) {
		t.Errorf("%d bytes compress to %d", len(data), out.Len())
	}
}

func TestWriteFileReturnsTheSumOfWhatItWrote(t *testing.T) {
	dir := t.TempDir()
	f := fileSpec{Path: "1/variables/variables.index", Size: 10 * kib}
	sum, err := writeFile(dir, "s", f)
	if err != nil {
		t.Fatal(err)
	}
	got, err := sumFile(path.Join(dir, f.Path))
	if err != nil {
		t.Fatal(err)
	}
	if got != sum || sum.Size != f.Size {
		t.Errorf("wrote %+v, file is %+v", sum, got)
	}
}

func shapeNamed(t *testing.T, name string) shape {
	t.Helper()
	for _, s := range shapes() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no shape %s", name)
	return shape{}
}

func keysOf(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
