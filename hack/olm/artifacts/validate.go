package artifacts

import (
	"fmt"
	"strings"

	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/validation"
	valerrors "github.com/operator-framework/api/pkg/validation/errors"
	interfaces "github.com/operator-framework/api/pkg/validation/interfaces"
)

// KubeVersion is the Kubernetes release the bundle is checked against for
// removed APIs: the one the project builds and tests with.
const KubeVersion = "1.37"

// bundleValidators are what `operator-sdk bundle validate
// --select-optional suite=operatorframework` runs: the default bundle
// validators and those of OperatorHub and of good practices.
var bundleValidators = interfaces.Validators{}.
	WithValidators(validation.DefaultBundleValidators...).
	WithValidators(
		validation.OperatorHubV2Validator,
		validation.StandardCapabilitiesValidator,
		validation.StandardCategoriesValidator,
		validation.GoodPracticesValidator,
		validation.AlphaDeprecatedAPIsValidator,
	)

// Findings are what the validators reported.
type Findings struct {
	Errors   []string
	Warnings []string
}

// Failed tells whether anything at all was reported.
func (f Findings) Failed() bool { return len(f.Errors) > 0 || len(f.Warnings) > 0 }

func (f Findings) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d errors, %d warnings\n", len(f.Errors), len(f.Warnings))
	for _, e := range f.Errors {
		fmt.Fprintf(&b, "ERROR %s\n", e)
	}
	for _, w := range f.Warnings {
		fmt.Fprintf(&b, "WARNING %s\n", w)
	}
	return b.String()
}

// ValidateBundle loads a bundle directory as OLM does and runs the
// validators on it.
func ValidateBundle(dir string) (Findings, error) {
	b, err := manifests.GetBundleFromDir(dir)
	if err != nil {
		return Findings{}, fmt.Errorf("load bundle %s: %w", dir, err)
	}
	objs := append(b.ObjectsToValidate(), map[string]string{"k8s-version": KubeVersion})
	var f Findings
	for _, r := range bundleValidators.Validate(objs...) {
		for _, e := range r.Errors {
			f.Errors = append(f.Errors, describe(r, e))
		}
		for _, w := range r.Warnings {
			f.Warnings = append(f.Warnings, describe(r, w))
		}
	}
	return f, nil
}

func describe(r valerrors.ManifestResult, e valerrors.Error) string {
	return fmt.Sprintf("[%s] %s", r.Name, e.Error())
}
