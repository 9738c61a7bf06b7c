package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/clip"
	"github.com/modelserver-dev/modelserver-operator/internal/imagesig"
)

// maxSignatureBlob caps what is read of a signature's payload or bundle:
// a few KiB each, as cosign writes them.
const maxSignatureBlob = 1 << 20

// verifySignature finds the cosign signatures of the image the reference
// resolved to and returns the key of the first that one of keys made for
// it: among the image's referrers, the sigstore bundles cosign 3 attaches
// (the registry's referrers API, or the sha256-<hex> index of registries
// without it), then the older form's manifest tagged sha256-<hex>.sig.
// Nothing of the model is pulled before. A registry that has no signature
// by those keys fails the fetch for good, naming what it has.
func (m *ociModel) verifySignature(ctx context.Context, keys []imagesig.Key) (imagesig.Key, error) {
	// cosign signs what it is given: an image index where a tag names one
	// (a model image built for several platforms), or the image.
	signed := []name.Digest{m.named}
	if m.pinned != m.named {
		signed = append(signed, m.pinned)
	}
	var seen, tags []string
	for _, d := range signed {
		k, why, tag, err := m.signaturesOf(ctx, d, keys)
		if err != nil || k.ID != "" {
			return k, err
		}
		seen, tags = append(seen, why...), append(tags, tag)
	}
	digest := m.named.DigestStr()
	if len(seen) == 0 {
		return imagesig.Key{}, permanentf(servingv1alpha1.ReasonSignatureNotVerified,
			"%s (%s) has no cosign signature: none among its referrers, nor in %s; sign it (cosign sign --key cosign.key %s@%s) with a key of spec.model.signature, or, if cosign stored its signatures in another repository (COSIGN_REPOSITORY), name it in spec.model.signature.repository",
			m.shown, digest, strings.Join(tags, " or "), m.ref.Context(), digest)
	}
	return imagesig.Key{}, permanentf(servingv1alpha1.ReasonSignatureNotVerified,
		"%s (%s): no cosign signature by a key of spec.model.signature: %s", m.shown, digest, clip.To(strings.Join(seen, "; "), 600))
}

// signaturesOf checks the signatures of one digest: the key of one that
// verifies it, or why each does not, and the tag of the older form.
func (m *ociModel) signaturesOf(ctx context.Context, signed name.Digest, keys []imagesig.Key) (imagesig.Key, []string, string, error) {
	opts := append(m.opts, remote.WithContext(ctx))
	digest := signed.DigestStr()
	// Where the signatures are: beside the image, or in the repository
	// cosign was told (COSIGN_REPOSITORY), under the same digest.
	repo := signed.Context()
	if m.signatures != nil {
		repo = *m.signatures
	}
	var seen []string
	refs, err := remote.Referrers(repo.Digest(digest), opts...)
	if err != nil {
		return imagesig.Key{}, nil, "", m.classify(err, m.shown+" referrers")
	}
	index, err := refs.IndexManifest()
	if err != nil {
		return imagesig.Key{}, nil, "", m.classify(err, m.shown+" referrers")
	}
	for _, d := range index.Manifests {
		k, why, err := m.checkReferrer(repo, d, keys, digest, opts)
		if err != nil || k.ID != "" {
			return k, nil, "", err
		}
		seen = append(seen, why...)
	}

	tag := repo.Tag(strings.Replace(digest, ":", "-", 1) + imagesig.SignatureTagSuffix)
	img, err := remote.Image(tag, opts...)
	var te *transport.Error
	switch {
	case errors.As(err, &te) && te.StatusCode == http.StatusNotFound:
	case err != nil:
		return imagesig.Key{}, nil, "", m.classify(err, tag.String())
	default:
		k, why, err := checkSimpleSignatures(img, keys, digest)
		if err != nil {
			return imagesig.Key{}, nil, "", m.classify(err, tag.String())
		}
		if k.ID != "" {
			return k, nil, "", nil
		}
		seen = append(seen, why...)
	}
	return imagesig.Key{}, seen, tag.String(), nil
}

// checkReferrer checks the sigstore bundles of one referrer; others (an
// SBOM, an attestation of another kind of layer) are passed over. Each
// referrer's layers are looked at, as cosign looks: its artifactType may
// be the bundle's, or, where a registry lists the config's media type in
// its place, the empty config's.
func (m *ociModel) checkReferrer(repo name.Repository, d v1.Descriptor, keys []imagesig.Key, digest string, opts []remote.Option) (imagesig.Key, []string, error) {
	ref := repo.Digest(d.Digest.String())
	img, err := remote.Image(ref, opts...)
	if err != nil {
		return imagesig.Key{}, nil, m.classify(err, ref.String())
	}
	layers, err := img.Layers()
	if err != nil {
		return imagesig.Key{}, nil, m.classify(err, ref.String())
	}
	var why []string
	for _, l := range layers {
		mt, err := l.MediaType()
		if err != nil || !strings.HasPrefix(string(mt), imagesig.BundleMediaTypePrefix) {
			continue
		}
		blob, err := readSignatureBlob(l)
		if err != nil {
			return imagesig.Key{}, nil, m.classify(err, ref.String())
		}
		k, err := imagesig.VerifyBundle(keys, blob, digest)
		if err == nil {
			return k, nil, nil
		}
		why = append(why, fmt.Sprintf("bundle %s: %v", shortDigest(d.Digest), err))
	}
	return imagesig.Key{}, why, nil
}

// checkSimpleSignatures checks each signature of the older form's
// manifest: a layer each.
func checkSimpleSignatures(img v1.Image, keys []imagesig.Key, digest string) (imagesig.Key, []string, error) {
	manifest, err := img.Manifest()
	if err != nil {
		return imagesig.Key{}, nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return imagesig.Key{}, nil, err
	}
	var why []string
	for i, desc := range manifest.Layers {
		if desc.MediaType != imagesig.SimpleSigningMediaType || i >= len(layers) {
			continue
		}
		payload, err := readSignatureBlob(layers[i])
		if err != nil {
			return imagesig.Key{}, nil, err
		}
		k, err := imagesig.VerifySimpleSigning(keys, payload, desc.Annotations[imagesig.AnnotationSignature], digest)
		if err == nil {
			return k, nil, nil
		}
		why = append(why, fmt.Sprintf("tagged signature %d: %v", i+1, err))
	}
	return imagesig.Key{}, why, nil
}

// readSignatureBlob reads a layer of a signature, its digest checked.
func readSignatureBlob(l v1.Layer) ([]byte, error) {
	if size, err := l.Size(); err == nil && size > maxSignatureBlob {
		return nil, permanentf(servingv1alpha1.ReasonSignatureNotVerified, "a signature layer of %d bytes, over the %d read", size, maxSignatureBlob)
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }()
	b, err := io.ReadAll(io.LimitReader(rc, maxSignatureBlob))
	if err != nil {
		return nil, err
	}
	return b, nil
}

func shortDigest(h v1.Hash) string {
	if len(h.Hex) > 12 {
		return h.Algorithm + ":" + h.Hex[:12]
	}
	return h.String()
}
