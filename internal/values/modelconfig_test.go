package values

import (
	"strings"
	"testing"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

func TestModelConfigPolicies(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy *servingv1alpha1.VersionPolicy
		labels map[string]int64
		want   []string
	}{
		{"default is the latest version", nil, nil, []string{"latest {\n        num_versions: 1\n      }"}},
		{"latest 3", &servingv1alpha1.VersionPolicy{Latest: &servingv1alpha1.LatestVersions{NumVersions: 3}}, nil, []string{"num_versions: 3"}},
		{"specific", &servingv1alpha1.VersionPolicy{Specific: &servingv1alpha1.SpecificVersions{Versions: []int64{1, 2}}}, nil,
			[]string{"specific {\n        versions: 1\n        versions: 2\n      }"}},
		{"all", &servingv1alpha1.VersionPolicy{All: &servingv1alpha1.AllVersions{}}, nil, []string{"all {\n      }"}},
		{"labels sorted", nil, map[string]int64{"stable": 1, "canary": 2},
			[]string{"version_labels {\n      key: \"canary\"\n      value: 2\n    }\n    version_labels {\n      key: \"stable\"\n      value: 1\n    }"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ModelConfig([]ModelEntry{{Name: "resnet", BasePath: "/models/g", Policy: tc.policy, Labels: tc.labels}})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range append(tc.want, `name: "resnet"`, `base_path: "/models/g"`, `model_platform: "tensorflow"`) {
				if !strings.Contains(got, w) {
					t.Errorf("config lacks %q:\n%s", w, got)
				}
			}
			if strings.Count(got, "{") != strings.Count(got, "}") {
				t.Errorf("unbalanced braces:\n%s", got)
			}
		})
	}
}

func TestModelConfigEscapesStrings(t *testing.T) {
	got, err := ModelConfig([]ModelEntry{{Name: "a\"b\\c\nd}", BasePath: "/models/x"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, `name: "a\"b\\c\012d}"`) {
		t.Errorf("name not escaped:\n%s", got)
	}
	if strings.Count(got, "\n") != strings.Count(mustConfig(t, "plain", "/models/x"), "\n") {
		t.Errorf("an escaped newline still broke the line structure:\n%s", got)
	}
}

func mustConfig(t *testing.T, name, path string) string {
	t.Helper()
	c, err := ModelConfig([]ModelEntry{{Name: name, BasePath: path}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
