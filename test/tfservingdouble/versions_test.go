package main

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseVersion(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    int64
		ok   bool
	}{
		{"123", 123, true}, {"00000123", 123, true}, {"0", 0, true}, {"007", 7, true},
		{"9223372036854775807", 9223372036854775807, true},
		{"9223372036854775808", 0, false}, {"-1", 0, false}, {"+1", 0, false}, {"1.0", 0, false},
		{"12a", 0, false}, {"a12", 0, false}, {"", 0, false}, {" 1", 0, false}, {"tmp-123", 0, false},
	} {
		if v, ok := parseVersion(tc.name); v != tc.v || ok != tc.ok {
			t.Errorf("parseVersion(%q) = %d, %v; want %d, %v", tc.name, v, ok, tc.v, tc.ok)
		}
	}
}

func TestScanVersions(t *testing.T) {
	base := t.TempDir()
	addVersion(t, base, "00000123")
	addVersion(t, base, "124")
	writeFile(t, filepath.Join(base, "125", "saved_model.pbtxt"), "text graph")
	writeFile(t, filepath.Join(base, "126", "variables", "variables.index"), "") // no SavedModel yet
	addVersion(t, base, "abc")
	addVersion(t, base, "12a")
	addVersion(t, base, "-7")
	writeFile(t, filepath.Join(base, "200"), "a file, not a directory")
	writeFile(t, filepath.Join(base, "201", "saved_model.pb", "x"), "saved_model.pb is a directory")
	addVersion(t, base, "7")
	addVersion(t, base, "007")

	scan, err := scanVersions("m", base)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]string{
		123: filepath.Join(base, "00000123"),
		124: filepath.Join(base, "124"),
		125: filepath.Join(base, "125"),
		7:   filepath.Join(base, "7"), // "007" < "7" by name: the later one wins
	}
	if !maps.Equal(scan.versions, want) {
		t.Errorf("versions %v, want %v", scan.versions, want)
	}
	incomplete := []string{filepath.Join(base, "126"), filepath.Join(base, "200"), filepath.Join(base, "201")}
	if !slices.Equal(scan.incomplete, incomplete) {
		t.Errorf("incomplete %v, want %v", scan.incomplete, incomplete)
	}
	if !slices.Equal(scan.duplicates, []string{filepath.Join(base, "007")}) {
		t.Errorf("duplicates %v", scan.duplicates)
	}

	for _, tc := range []struct{ base, err string }{
		{filepath.Join(base, "missing"), "Could not find base path " + filepath.Join(base, "missing") + " for servable m with error NOT_FOUND"},
		{filepath.Join(base, "200"), "Could not list base path"},
		{"gs://bucket/m", "File system scheme 'gs' not implemented"},
	} {
		if _, err := scanVersions("m", tc.base); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("scanVersions(%s) = %v, want %q", tc.base, err, tc.err)
		}
	}
	empty := t.TempDir()
	if scan, err := scanVersions("m", empty); err != nil || len(scan.versions) != 0 {
		t.Errorf("empty base path: %+v, %v", scan, err)
	}
	if err := os.Symlink(filepath.Join(base, "124"), filepath.Join(empty, "300")); err != nil {
		t.Fatal(err)
	}
	if scan, err := scanVersions("m", empty); err != nil || scan.versions[300] == "" {
		t.Errorf("a symlinked version: %+v, %v", scan, err)
	}
}

func TestAspire(t *testing.T) {
	found := map[int64]string{1: "/b/1", 3: "/b/3", 7: "/b/7", 12: "/b/12"}
	for _, tc := range []struct {
		name    string
		policy  versionPolicy
		want    []int64
		missing []int64
	}{
		{"default is the latest", versionPolicy{}, []int64{12}, nil},
		{"latest 1", versionPolicy{kind: policyLatest, latest: 1}, []int64{12}, nil},
		{"latest 2 by number, not by name", versionPolicy{kind: policyLatest, latest: 2}, []int64{7, 12}, nil},
		{"latest more than there are", versionPolicy{kind: policyLatest, latest: 10}, []int64{1, 3, 7, 12}, nil},
		{"specific", versionPolicy{kind: policySpecific, specific: []int64{3, 7}}, []int64{3, 7}, nil},
		{"specific, some missing", versionPolicy{kind: policySpecific, specific: []int64{3, 5, 5, 99}}, []int64{3}, []int64{5, 99}},
		{"specific, none", versionPolicy{kind: policySpecific}, nil, nil},
		{"all", versionPolicy{kind: policyAll}, []int64{1, 3, 7, 12}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, missing := aspire(tc.policy, found)
			if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, tc.want) || !slices.Equal(missing, tc.missing) {
				t.Errorf("aspired %v, missing %v; want %v, %v", keys, missing, tc.want, tc.missing)
			}
			for v, dir := range got {
				if dir != found[v] {
					t.Errorf("version %d at %s, want %s", v, dir, found[v])
				}
			}
		})
	}
	if got, _ := aspire(versionPolicy{kind: policyLatest, latest: 3}, nil); len(got) != 0 {
		t.Errorf("nothing found, aspired %v", got)
	}
}
