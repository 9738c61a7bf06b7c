// Package nextchart makes the source tree of a next release of the
// operator: a copy of this tree whose chart differs from this one's in a
// way a user can see on the live objects but the serving pods cannot, so
// that an upgrade to it must reach every release without restarting a pod.
// The OLM suites build their next release from it, and the benchmark its
// operator upgrade.
package nextchart

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// VersionAnnotation is what the changed chart adds to the Service it
// renders: the chart's version, so that a reader of the live Service sees
// which chart made it.
const VersionAnnotation = "modelserver.dev/chart-version"

// CopyTree copies the repository's sources at root (not bin/ or .git) to
// dst, replacing whatever dst held.
func CopyTree(root, dst string) error {
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel == "bin" || rel == ".git" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, info.Mode().Perm())
	})
}

// Change moves the chart in the tree at src from version from to version
// to (the same version keeps it: a build whose templates changed without
// a new version), and has its Service carry VersionAnnotation.
func Change(src, from, to string) error {
	chartDir := filepath.Join(src, "helm-charts", "modelserver")
	if err := replaceOnce(filepath.Join(chartDir, "Chart.yaml"), "\nversion: "+from+"\n", "\nversion: "+to+"\n"); err != nil {
		return err
	}
	return replaceOnce(filepath.Join(chartDir, "templates", "service.yaml"),
		"  {{- with .Values.service.annotations }}\n  annotations:\n    {{- include \"modelserver.stringMap\" . | nindent 4 }}\n  {{- end }}\n",
		"  annotations:\n    "+VersionAnnotation+": {{ .Chart.Version | quote }}\n    {{- with .Values.service.annotations }}\n    {{- include \"modelserver.stringMap\" . | nindent 4 }}\n    {{- end }}\n")
}

// replaceOnce fails unless old occurs exactly once in file: a chart that
// has moved on must fail the change loudly, not pass it unchanged.
func replaceOnce(file, old, new string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if n := strings.Count(string(data), old); n != 1 {
		return fmt.Errorf("%s: expected exactly one %q to change, found %d; has the file changed?", file, old, n)
	}
	return os.WriteFile(file, []byte(strings.Replace(string(data), old, new, 1)), 0o644)
}
