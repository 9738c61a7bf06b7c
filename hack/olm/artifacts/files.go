package artifacts

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Where the inputs are, relative to the repository root.
const (
	CSVBaseFile = "config/manifests/bases/modelserver-operator.clusterserviceversion.yaml"
	SamplesDir  = "config/samples"
)

// Defaults of the release parameters.
const (
	DefaultVersion      = "0.1.0"
	DefaultChannel      = "candidate"
	DefaultImageRepo    = "ghcr.io/modelserver-dev/modelserver-operator"
	DefaultBundleRepo   = "ghcr.io/modelserver-dev/modelserver-operator-bundle"
	defaultSkipRangeFmt = ">=0.0.0 <%s"
)

// DefaultParams are the parameters of a release of version v in the
// default channel: the image tagged v, skipping every earlier version.
func DefaultParams(v string) Params {
	return Params{
		Version:        v,
		Channels:       []string{DefaultChannel},
		DefaultChannel: DefaultChannel,
		Image:          DefaultImageRepo + ":" + v,
		SkipRange:      fmt.Sprintf(defaultSkipRangeFmt, v),
	}
}

// DefaultBundleImage is the bundle image of version v.
func DefaultBundleImage(v string) string { return DefaultBundleRepo + ":v" + v }

// ReadInputs reads the CSV base and the samples under the repository root;
// kustomized is the output of `kustomize build config/default`.
func ReadInputs(root string, kustomized []byte) (Inputs, error) {
	base, err := os.ReadFile(filepath.Join(root, CSVBaseFile))
	if err != nil {
		return Inputs{}, err
	}
	samples, err := filepath.Glob(filepath.Join(root, SamplesDir, "*.yaml"))
	if err != nil {
		return Inputs{}, err
	}
	slices.Sort(samples)
	image, err := ServingImage(root)
	if err != nil {
		return Inputs{}, err
	}
	scorecard, err := ScorecardConfig(root)
	if err != nil {
		return Inputs{}, err
	}
	in := Inputs{CSVBase: base, Kustomized: kustomized, ServingImage: image, Scorecard: scorecard}
	for _, s := range samples {
		if filepath.Base(s) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(s)
		if err != nil {
			return Inputs{}, err
		}
		in.Samples = append(in.Samples, data)
	}
	return in, nil
}

// APITypesFile holds the API's DefaultImage constant.
const APITypesFile = "api/v1alpha1/modelserver_types.go"

var defaultImageLine = regexp.MustCompile(`(?m)^const DefaultImage = "([^"]+)"`)

// ServingImage is the TensorFlow Serving image the API defaults to, read
// from its Go source: this module does not import the operator's.
func ServingImage(root string) (string, error) {
	src, err := os.ReadFile(filepath.Join(root, APITypesFile))
	if err != nil {
		return "", err
	}
	m := defaultImageLine.FindSubmatch(src)
	if m == nil {
		return "", fmt.Errorf(`%s has no line const DefaultImage = "..."`, APITypesFile)
	}
	return string(m[1]), nil
}

// BundleDirs are the directories that hold nothing but what Bundle makes.
var BundleDirs = []string{ManifestsDir, MetadataDir, ScorecardConfigDir}

// WriteFiles writes files under root. Files in the directories clean
// (relative to root) that are not among them are removed, so that, with
// BundleDirs, an object dropped from config/ leaves the bundle too.
func WriteFiles(root string, files Files, clean ...string) error {
	for _, dir := range clean {
		entries, err := os.ReadDir(filepath.Join(root, dir))
		if err != nil && !os.IsNotExist(err) {
			return err
		}
		for _, e := range entries {
			if _, keep := files[dir+"/"+e.Name()]; !keep && !e.IsDir() {
				if err := os.Remove(filepath.Join(root, dir, e.Name())); err != nil {
					return err
				}
			}
		}
	}
	for name, data := range files {
		if strings.HasPrefix(name, "/") || strings.Contains(name, "..") {
			return fmt.Errorf("refusing to write %q outside the repository", name)
		}
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
