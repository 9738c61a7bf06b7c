package checks

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/operator-framework/api/pkg/apis/scorecard/v1alpha3"
	"sigs.k8s.io/yaml"

	"github.com/modelserver-dev/modelserver-operator/hack/olm/artifacts"
)

// scorecardTestRepo is the image operator-sdk scaffolds its tests with;
// the tag must be the pinned CLI's version, because the CLI and the test
// image share the scorecard types and the tests' code.
const scorecardTestRepo = "quay.io/operator-framework/scorecard-test"

func pinnedOperatorSDK(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "hack", "tools", "operator-sdk", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?github\.com/operator-framework/operator-sdk (v\S+)`).FindSubmatch(data)
	if m == nil {
		t.Fatal("hack/tools/operator-sdk/go.mod does not require github.com/operator-framework/operator-sdk")
	}
	return string(m[1])
}

func TestScorecardTestsRunThePinnedOperatorSDKsImage(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, artifacts.ScorecardConfigFile))
	if err != nil {
		t.Fatalf("%v (make bundle writes it from %s)", err, artifacts.ScorecardDir)
	}
	var c v1alpha3.Configuration
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		t.Fatal(err)
	}
	want := scorecardTestRepo + ":" + pinnedOperatorSDK(t)
	suites := map[string]int{}
	for _, s := range c.Stages {
		for _, test := range s.Tests {
			suites[test.Labels["suite"]]++
			if test.Image != want {
				t.Errorf("%s: test %s runs %s, want %s", artifacts.ScorecardDir, test.Labels["test"], test.Image, want)
			}
		}
	}
	// What operator-sdk scaffolds: users select these suites by label.
	if suites["basic"] != 1 || suites["olm"] != 5 {
		t.Errorf("%s: tests per suite %v, want basic 1 and olm 5", artifacts.ScorecardDir, suites)
	}
}

// The generator builds config/scorecard with the kustomize library, the
// user's `kustomize build` with bin/kustomize: they must agree.
func TestScorecardConfigIsWhatKustomizeBuilds(t *testing.T) {
	bin := filepath.Join(root, "bin", "kustomize")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("%s is missing: make test-olm builds it", bin)
	}
	out, err := exec.Command(bin, "build", filepath.Join(root, artifacts.ScorecardDir)).CombinedOutput()
	if err != nil {
		t.Fatalf("kustomize build %s: %v\n%s", artifacts.ScorecardDir, err, out)
	}
	got, err := artifacts.ScorecardConfig(root)
	if err != nil {
		t.Fatal(err)
	}
	if d := firstDifference(out, got); d != "" {
		t.Errorf("bin/kustomize and the generator build %s differently: %s", artifacts.ScorecardDir, strings.TrimSpace(d))
	}
}
