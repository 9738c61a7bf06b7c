package olm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/modelserver-dev/modelserver-operator/test/olmenv"
)

// scorecardNS is where the scorecard's test pods run; a namespace of its
// own, as a user gives `operator-sdk scorecard --namespace`.
const scorecardNS = "scorecard"

// scorecardWait is --wait-time: long enough for the first pull of the
// test images from the cluster's registry; a test itself takes a second.
const scorecardWait = 4 * time.Minute

// scorecardOutput is the part of `operator-sdk scorecard -o json` (a
// scorecard v1alpha3 TestList) the test reads.
type scorecardOutput struct {
	Items []struct {
		Spec struct {
			Image      string            `json:"image"`
			Entrypoint []string          `json:"entrypoint"`
			Labels     map[string]string `json:"labels"`
		} `json:"spec"`
		Status struct {
			Results []struct {
				Name        string   `json:"name"`
				State       string   `json:"state"`
				Errors      []string `json:"errors"`
				Suggestions []string `json:"suggestions"`
				Log         string   `json:"log"`
			} `json:"results"`
		} `json:"status"`
	} `json:"items"`
}

// TestScorecardBasicAndOLMSuitesPass runs `operator-sdk scorecard ./bundle`
// from the repository's root for the basic and the olm suites, as a user
// does: the CLI reads the scorecard config through the bundle's test
// annotation, ships the bundle in a ConfigMap, and runs each test in a pod
// on the real node, from the test image the config names and the untar
// init image, both built from the pinned operator-sdk. Every test the
// config selects must run and pass.
func TestScorecardBasicAndOLMSuitesPass(t *testing.T) {
	e := startOLM(t)
	sdk := filepath.Join(e.BinDir, "operator-sdk")
	if _, err := os.Stat(sdk); err != nil {
		t.Fatalf("%s: run `make tools`", sdk)
	}
	bundleDir := filepath.Join(e.Root, "bundle")
	configFile, err := olmenv.ScorecardConfig(bundleDir)
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	untarImage, err := e.PushScorecardImages(ctx, bundleDir, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built and pushed the scorecard-test and scorecard-untar images (%.1fs); --untar-image=%s", time.Since(start).Seconds(), untarImage)

	kubectl(t, e, "", "create", "namespace", scorecardNS)
	t.Cleanup(func() {
		if out, err := e.Kubectl("", "delete", "namespace", scorecardNS, "--wait=false"); err != nil {
			t.Logf("delete namespace %s: %v\n%s", scorecardNS, err, out)
		}
	})
	// The test pods run as the namespace's default account, which the
	// service-account controller creates after the namespace.
	eventually(t, time.Minute, "ServiceAccount default in "+scorecardNS, func() (bool, string) {
		out, err := e.Kubectl("", "-n", scorecardNS, "get", "serviceaccount", "default", "-o", "name")
		return err == nil, fmt.Sprint(out, err)
	})

	for _, suite := range []string{"basic", "olm"} {
		t.Run("suite="+suite, func(t *testing.T) {
			want := configuredTests(t, configFile, suite)
			args := []string{"scorecard", "./bundle", "--kubeconfig", e.Cluster.Kubeconfig, "--namespace", scorecardNS,
				"--selector=suite=" + suite, "--untar-image=" + untarImage, "--wait-time=" + scorecardWait.String(), "-o", "json"}
			cmd := exec.Command(sdk, args...)
			cmd.Dir = e.Root
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			start := time.Now()
			runErr := cmd.Run()
			t.Logf("operator-sdk %s (%.1fs, %v)\n%s%s", strings.Join(args, " "), time.Since(start).Seconds(), runErr, stdout.String(), stderr.String())

			var out scorecardOutput
			if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
				if runErr != nil {
					t.Logf("scorecard pods:\n%s", e.Describe(scorecardNS, "pods"))
				}
				t.Fatalf("operator-sdk scorecard printed no JSON test list (%v): %v", runErr, err)
			}
			ran, failed := scorecardResults(t, out)
			slices.Sort(ran)
			if !slices.Equal(ran, want) {
				t.Errorf("the suite ran %q, want the tests %s configures: %q", ran, configFile, want)
			}
			if len(failed) > 0 {
				t.Errorf("scorecard suite %s: %d of %d tests did not pass:\n%s", suite, len(failed), len(ran), strings.Join(failed, "\n"))
			}
			// The CLI exits 1 exactly when a test did not pass.
			var exit *exec.ExitError
			failedTests := errors.As(runErr, &exit) && exit.ExitCode() == 1 && len(failed) > 0
			if runErr != nil && !failedTests {
				t.Errorf("operator-sdk scorecard: %v", runErr)
			}
		})
	}
}

// scorecardResults logs every result of the scorecard's output and
// returns the tests that ran (one per result) and the results that did
// not pass.
func scorecardResults(t *testing.T, out scorecardOutput) (ran, failed []string) {
	t.Helper()
	for _, item := range out.Items {
		for _, r := range item.Status.Results {
			ran = append(ran, item.Spec.Labels["test"])
			t.Logf("%s (%s): %s%s%s", item.Spec.Labels["test"], r.Name, r.State,
				listed("errors", r.Errors), listed("suggestions", r.Suggestions))
			if r.State != "pass" {
				failed = append(failed, fmt.Sprintf("%s: %s: %s", item.Spec.Labels["test"], r.State, strings.Join(r.Errors, "; ")))
			}
		}
	}
	return ran, failed
}

// configuredTests are the test labels of a suite in a scorecard config,
// sorted.
func configuredTests(t *testing.T, configFile, suite string) []string {
	t.Helper()
	data, err := os.ReadFile(configFile)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Stages []struct {
			Tests []struct {
				Labels map[string]string `json:"labels"`
			} `json:"tests"`
		} `json:"stages"`
	}
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("%s: %v", configFile, err)
	}
	var tests []string
	for _, s := range c.Stages {
		for _, test := range s.Tests {
			if test.Labels["suite"] == suite {
				tests = append(tests, test.Labels["test"])
			}
		}
	}
	if len(tests) == 0 {
		t.Fatalf("%s has no tests of suite %s", configFile, suite)
	}
	slices.Sort(tests)
	return tests
}

func listed(what string, items []string) string {
	if len(items) == 0 {
		return ""
	}
	return fmt.Sprintf("\n  %s:\n    %s", what, strings.Join(items, "\n    "))
}
