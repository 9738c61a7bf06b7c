package fetch

import (
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"

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
		"%s changed in place since its fetch Job verified it (digest %s, not %s): a new spec.model.refetch fetches and verifies what it holds now, for every pod",
		loc.String(), shortDigestOf(sum.Digest), shortDigestOf(p.Digest))
}

// shortDigestOf is shortDigest of a digest's string: the status message
// it ends up in is clipped.
func shortDigestOf(d string) string {
	h, err := v1.NewHash(d)
	if err != nil {
		return d
	}
	return shortDigest(h)
}
