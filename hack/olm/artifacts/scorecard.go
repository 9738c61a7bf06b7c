package artifacts

import (
	"fmt"
	"path/filepath"

	"github.com/operator-framework/api/pkg/apis/scorecard/v1alpha3"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// The scorecard configuration: config/scorecard is kustomized into the
// bundle, where `operator-sdk scorecard` finds it through the bundle's
// test annotations, as operator-sdk's own `generate bundle` puts it.
const (
	ScorecardDir        = "config/scorecard"
	ScorecardConfigDir  = "bundle/tests/scorecard"
	ScorecardConfigFile = ScorecardConfigDir + "/config.yaml"
	// scorecardInImage is where the bundle image has it, relative to its
	// root, as the test.config annotation names it.
	scorecardInImage = "tests/scorecard/"
)

// ScorecardConfig is `kustomize build config/scorecard` under root, by the
// kustomize library of the version hack/tools pins for bin/kustomize, so
// that the bundle needs no kustomize run of its own from the Makefile.
func ScorecardConfig(root string) ([]byte, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(root, ScorecardDir))
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", ScorecardDir, err)
	}
	return m.AsYaml()
}

// checkScorecardConfig wants exactly one scorecard Configuration with tests,
// since operator-sdk reads the file as one.
func checkScorecardConfig(data []byte) error {
	var c v1alpha3.Configuration
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return fmt.Errorf("%s: %w", ScorecardDir, err)
	}
	if c.APIVersion != v1alpha3.GroupVersion.String() || c.Kind != v1alpha3.ConfigurationKind {
		return fmt.Errorf("%s: %s %s, want one %s %s", ScorecardDir, c.APIVersion, c.Kind, v1alpha3.GroupVersion, v1alpha3.ConfigurationKind)
	}
	n := 0
	for _, s := range c.Stages {
		for _, t := range s.Tests {
			if t.Image == "" || len(t.Entrypoint) == 0 {
				return fmt.Errorf("%s: test %v has no image or entrypoint", ScorecardDir, t.Labels)
			}
			n++
		}
	}
	if n == 0 {
		return fmt.Errorf("%s: no tests", ScorecardDir)
	}
	return nil
}
