// Package docs_test keeps the documentation honest: the troubleshooting
// table covers every status reason the code can set, and links resolve.
package docs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// statusReasons collects the string constants that are condition reasons:
// the API's Reason* constants, the fetcher's among them (the first word of
// a failed fetch's termination message, copied into the status).
func statusReasons(t *testing.T) map[string]string {
	t.Helper()
	const glob = "../api/v1alpha1/*.go"
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		t.Fatalf("no files match %s", glob)
	}
	reasons := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for name, value := range stringConsts(file) {
			if strings.HasPrefix(name, "Reason") {
				reasons[value] = f + ": " + name
			}
		}
	}
	return reasons
}

// stringConsts maps the constants of file declared with a string literal
// to their values.
func stringConsts(file *ast.File) map[string]string {
	consts := map[string]string{}
	for _, decl := range file.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, s := range gen.Specs {
			spec := s.(*ast.ValueSpec)
			for i, name := range spec.Names {
				if i >= len(spec.Values) {
					continue
				}
				if lit, ok := spec.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					consts[name.Name], _ = strconv.Unquote(lit.Value)
				}
			}
		}
	}
	return consts
}

var tableReason = regexp.MustCompile("(?m)^\\| `([A-Za-z]+)` \\|")

func TestTroubleshootingCoversEveryStatusReason(t *testing.T) {
	doc, err := os.ReadFile("operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Troubleshooting\n")
	if !ok {
		t.Fatal("operations.md has no Troubleshooting section")
	}
	documented := map[string]bool{}
	for _, m := range tableReason.FindAllStringSubmatch(section, -1) {
		documented[m[1]] = true
	}
	reasons := statusReasons(t)
	if len(reasons) < 15 {
		t.Fatalf("found only %d reasons in the code: the search is broken", len(reasons))
	}
	for _, r := range slices.Sorted(maps.Keys(reasons)) {
		if !documented[r] {
			t.Errorf("reason %s (%s) is missing from the troubleshooting table in docs/operations.md", r, reasons[r])
		}
	}
	for r := range documented {
		if _, ok := reasons[r]; !ok {
			t.Errorf("the troubleshooting table lists %s, which no code sets any more", r)
		}
	}
}

var mdLink = regexp.MustCompile(`\]\(([^)#\s]+)(#[^)\s]*)?\)`)

func TestDocumentationLinksResolve(t *testing.T) {
	files, _ := filepath.Glob("*.md")
	more, _ := filepath.Glob("storage/*.md")
	files = append(append(files, more...), "../README.md")
	for _, f := range files {
		if f == "api-reference.md" || f == "kubectl-explain.md" {
			continue // generated; their validation patterns look like links
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(raw), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(f), target)); err != nil {
				t.Errorf("%s links to %s, which does not exist", f, target)
			}
		}
	}
}
