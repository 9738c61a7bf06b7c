package fetch

import (
	"fmt"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/fetchcontract"
	"github.com/modelserver-dev/modelserver-operator/internal/storageuri"
)

// Pin is what a model-fetch Job found, which a serving pod's own copy must
// be.
type Pin fetchcontract.Pin

// location is where the pinned model is read from: loc, or the image by
// digest an oci:// model's tag was resolved to.
func (p Pin) location(loc storageuri.Location) (storageuri.Location, error) {
	if p.Image == "" {
		return loc, nil
	}
	if loc.Scheme != storageuri.SchemeOCI {
		return loc, fmt.Errorf("a pinned image applies to oci:// models only, not %s", loc.Scheme)
	}
	pinned, err := storageuri.Parse("oci://" + p.Image)
	if err != nil {
		return loc, fmt.Errorf("the pinned image: %w", err)
	}
	return pinned, nil
}

// check fails a fetch whose model is not the pinned one: the store changed
// in place since the Job fetched it.
func (p Pin) check(sum Summary, loc storageuri.Location) error {
	if p.Digest == "" || sum.Digest == p.Digest {
		return nil
	}
	return permanentf(servingv1alpha1.ReasonModelChanged,
		"%s holds another model than the one its fetch Job verified (digest %s, not %s): the store changed in place since; a new spec.model.refetch fetches what it holds now, for every pod",
		loc.String(), sum.Digest, p.Digest)
}
