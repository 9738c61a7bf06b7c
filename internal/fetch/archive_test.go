package fetch

import (
	"archive/tar"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

func TestMaliciousArchivesAreRefusedAndWriteNothingOutside(t *testing.T) {
	good := entries(model(1))
	cases := []struct {
		name    string
		entries func(root string) []archiveEntry
		zip     bool
	}{
		{"a .. path", func(string) []archiveEntry {
			return []archiveEntry{{name: "../evil", body: []byte("x")}}
		}, false},
		{"a .. path inside a version", func(string) []archiveEntry {
			return []archiveEntry{{name: "1/../../../evil", body: []byte("x")}}
		}, false},
		{"an absolute path", func(root string) []archiveEntry {
			return []archiveEntry{{name: filepath.Join(root, "evil"), body: []byte("x")}}
		}, false},
		{"a symbolic link out, then a file through it", func(root string) []archiveEntry {
			return []archiveEntry{
				{name: "1/variables", typ: tar.TypeSymlink, link: root},
				{name: "1/variables/evil", body: []byte("x")},
			}
		}, false},
		{"a relative symbolic link out", func(string) []archiveEntry {
			return []archiveEntry{{name: "1/evil", typ: tar.TypeSymlink, link: "../../../evil"}}
		}, false},
		{"a symbolic link inside", func(string) []archiveEntry {
			return []archiveEntry{{name: "1/alias.pb", typ: tar.TypeSymlink, link: "saved_model.pb"}}
		}, false},
		{"a hard link out", func(root string) []archiveEntry {
			return []archiveEntry{{name: "1/evil", typ: tar.TypeLink, link: filepath.Join(root, "victim")}}
		}, false},
		{"a FIFO", func(string) []archiveEntry {
			return []archiveEntry{{name: "1/evil", typ: tar.TypeFifo}}
		}, false},
		{"a device", func(string) []archiveEntry {
			return []archiveEntry{{name: "1/evil", typ: tar.TypeChar}}
		}, false},
		{"a zip with a .. path", func(string) []archiveEntry {
			return []archiveEntry{{name: "../evil", body: []byte("x")}}
		}, true},
		{"a zip with an absolute path", func(root string) []archiveEntry {
			return []archiveEntry{{name: filepath.Join(root, "evil"), body: []byte("x")}}
		}, true},
		{"a zip with a symbolic link", func(root string) []archiveEntry {
			return []archiveEntry{{name: "1/evil", typ: tar.TypeSymlink, link: root}}
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			if err := os.WriteFile(filepath.Join(root, "victim"), []byte("untouched"), 0o644); err != nil {
				t.Fatal(err)
			}
			// The bad entry comes after good ones, as in a real attack.
			es := append(append([]archiveEntry{}, good...), c.entries(root)...)
			archive, name := tarball(t, true, es), "/m.tar.gz"
			if c.zip {
				archive, name = zipball(t, es), "/m.zip"
			}
			srv := serveFile(t, archive)
			o, _ := testOptions(t, srv.URL+name, "")
			o.Dest = filepath.Join(root, "models", "gen-1")
			_, err := Run(context.Background(), o)
			fe := wantFailure(t, err, servingv1alpha1.ReasonInvalidLayout, ExitPermanent)
			if !strings.Contains(fe.Message, "archive entry") {
				t.Errorf("message %q does not name the entry", fe.Message)
			}
			// Only the victim and the (empty) parent of the destination.
			var found []string
			_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if p != root {
					rel, _ := filepath.Rel(root, p)
					found = append(found, rel)
				}
				return nil
			})
			if strings.Join(found, ",") != "models,victim" {
				t.Errorf("after the fetch %s holds %v; want only models (empty) and victim", root, found)
			}
			if b, _ := os.ReadFile(filepath.Join(root, "victim")); string(b) != "untouched" {
				t.Error("the file outside was changed")
			}
		})
	}
}

func TestEntryPath(t *testing.T) {
	for name, want := range map[string]string{
		"1/saved_model.pb":   "1/saved_model.pb",
		"./1/saved_model.pb": "1/saved_model.pb",
		"1//variables/":      "1/variables",
		"./":                 "",
		"a/./b":              "a/b",
	} {
		if got, err := entryPath(name); err != nil || got != want {
			t.Errorf("entryPath(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
	for _, name := range []string{"../x", "a/../../x", "a/..", "/etc/passwd", `..\x`, "a\x00b"} {
		if _, err := entryPath(name); err == nil {
			t.Errorf("entryPath(%q) accepted", name)
		}
	}
}
