package artifacts

import (
	"strings"
	"testing"
)

const widgetScorecard = `apiVersion: scorecard.operatorframework.io/v1alpha3
kind: Configuration
metadata:
  name: config
stages:
- parallel: true
  tests:
  - entrypoint: [scorecard-test, basic-check-spec]
    image: quay.io/operator-framework/scorecard-test:v1.42.2
    labels: {suite: basic, test: basic-check-spec-test}
`

// operator-sdk finds the config only through the test annotations, and in
// an image only where bundle.Dockerfile copies it.
func TestBundleCarriesTheScorecardConfig(t *testing.T) {
	in := widgetInputs(t)
	in.Scorecard = []byte(widgetScorecard)
	files, err := Bundle(in, widgetParams("1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	if string(files[ScorecardConfigFile]) != widgetScorecard {
		t.Errorf("%s: %q, want the kustomized config", ScorecardConfigFile, files[ScorecardConfigFile])
	}
	for _, want := range []string{"operators.operatorframework.io.test.config.v1: tests/scorecard/", "operators.operatorframework.io.test.mediatype.v1: scorecard+v1"} {
		if !strings.Contains(string(files[AnnotationsFile]), want) {
			t.Errorf("annotations lack %q:\n%s", want, files[AnnotationsFile])
		}
	}
	if df := string(files[BundleDockerfile]); !strings.Contains(df, "COPY bundle/tests/scorecard /tests/scorecard/\n") || !strings.Contains(df, "LABEL operators.operatorframework.io.test.config.v1=tests/scorecard/\n") {
		t.Errorf("bundle.Dockerfile does not ship the config:\n%s", df)
	}

	in.Scorecard = nil
	files, err = Bundle(in, widgetParams("1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := files[ScorecardConfigFile]; ok || strings.Contains(string(files[AnnotationsFile]), "test.config") || strings.Contains(string(files[BundleDockerfile]), "tests/scorecard") {
		t.Errorf("a bundle without scorecard tests names a scorecard config")
	}
}

func TestBundleRejectsAScorecardConfigWithoutTests(t *testing.T) {
	in := widgetInputs(t)
	in.Scorecard = []byte("apiVersion: scorecard.operatorframework.io/v1alpha3\nkind: Configuration\nmetadata:\n  name: config\nstages:\n- tests: []\n")
	if _, err := Bundle(in, widgetParams("1.0.0")); err == nil || !strings.Contains(err.Error(), "no tests") {
		t.Errorf("err %v, want no tests", err)
	}
}
