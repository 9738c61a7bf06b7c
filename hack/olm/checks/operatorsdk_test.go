package checks

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// operatorSDK is the pinned operator-sdk that `make tools` builds, or skips
// the test saying so.
func operatorSDK(t *testing.T) string {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join(root, "bin", "operator-sdk"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("no %s: `make tools` builds it", bin)
	}
	return bin
}

// deprecatedOperatorHub is what operator-sdk v1.42 says when its
// operatorhub validator is selected by name: the replacements it names are
// not selectable in this CLI (docs/olm.md).
const deprecatedOperatorHub = `The \"operatorhub\" validator is deprecated`

// explainedWarning tells the warnings operator-sdk v1.42's validators
// (built on operator-framework/api v0.34) give this bundle: the operatorhub
// validator's own deprecation, and any CSV
// permission on horizontalpodautoscalers or poddisruptionbudgets is taken
// for a use of their removed beta APIs, though RBAC rules name groups and
// resources, never versions. docs/olm.md says why it is wrong. Any other
// resource named, or any other warning, is news.
func explainedWarning(line string) bool {
	if strings.Contains(line, deprecatedOperatorHub) {
		return true
	}
	if !strings.Contains(line, "this bundle is using APIs which were deprecated and removed in v1.25") {
		return false
	}
	_, list, ok := strings.Cut(line, "Migrate the API(s) for ")
	if !ok {
		return false
	}
	named := regexp.MustCompile(`([a-z]+): \(\[`).FindAllStringSubmatch(list, -1)
	for _, m := range named {
		if m[1] != "horizontalpodautoscalers" && m[1] != "poddisruptionbudgets" {
			return false
		}
	}
	return len(named) > 0
}

// A user runs operator-sdk from the repository's root, where it reads
// PROJECT first: the layout PROJECT names must be one the pinned CLI has.
func TestOperatorSDKValidatesTheBundleFromTheRepositoryRoot(t *testing.T) {
	sdk := operatorSDK(t)
	for _, args := range [][]string{
		{"bundle", "validate", "./bundle"},
		{"bundle", "validate", "./bundle", "--select-optional", "suite=operatorframework"},
		{"bundle", "validate", "./bundle", "--select-optional", "name=operatorhub"},
		{"bundle", "validate", "./bundle", "--select-optional", "name=good-practices"},
	} {
		cmd := exec.Command(sdk, args...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("operator-sdk %s (from the repository root): %v\n%s", strings.Join(args, " "), err, out)
			continue
		}
		if !strings.Contains(string(out), "All validation tests have completed successfully") {
			t.Errorf("operator-sdk %s: no success line:\n%s", strings.Join(args, " "), out)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if strings.Contains(line, "level=error") || strings.Contains(line, "level=fatal") ||
				(strings.Contains(line, "level=warning") && !explainedWarning(line)) {
				t.Errorf("operator-sdk %s: a finding docs/olm.md does not explain:\n%s", strings.Join(args, " "), line)
			}
		}
	}
}
