// Package sigtest signs images as cosign does, for tests of what checks
// the signatures: a key as cosign generate-key-pair makes it, the
// signatures of cosign's older form (a manifest tagged sha256-<hex>.sig)
// and of cosign 3 (a sigstore bundle attached as a referrer). It is
// written from cosign's formats, not from the package it tests.
package sigtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// cosign's media types and annotation.
const (
	simpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	signatureAnnotation    = "dev.cosignproject.cosign/signature"
	bundleMediaType        = "application/vnd.dev.sigstore.bundle.v0.3+json"
	inTotoPayloadType      = "application/vnd.in-toto+json"
)

// Key is an ECDSA P-256 key, as cosign generate-key-pair makes.
type Key struct {
	priv *ecdsa.PrivateKey
}

// NewKey makes a key.
func NewKey(t testing.TB) *Key {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &Key{priv: priv}
}

// PublicPEM is the key's cosign.pub.
func (k *Key) PublicPEM() string {
	der, err := x509.MarshalPKIXPublicKey(&k.priv.PublicKey)
	if err != nil {
		panic(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// Sign signs msg as cosign does with such a key: the ASN.1 ECDSA
// signature of its sha256.
func (k *Key) Sign(msg []byte) []byte {
	d := sha256.Sum256(msg)
	sig, err := ecdsa.SignASN1(rand.Reader, k.priv, d[:])
	if err != nil {
		panic(err)
	}
	return sig
}

// SimpleSigningPayload is what cosign's older form signs for an image of
// repository (registry/repository) and digest.
func SimpleSigningPayload(repository, digest string) []byte {
	return []byte(`{"critical":{"identity":{"docker-reference":"` + repository + `"},"image":{"docker-manifest-digest":"` + digest +
		`"},"type":"cosign container image signature"},"optional":null}`)
}

// Bundle is the sigstore bundle cosign 3 attaches to an image it signs:
// a DSSE envelope, signed by sign, of an in-toto statement whose subject
// is digest.
func Bundle(sign func([]byte) []byte, digest string) []byte {
	alg, hexDigest, _ := strings.Cut(digest, ":")
	statement, _ := json.Marshal(map[string]any{
		"_type":         "https://in-toto.io/Statement/v1",
		"subject":       []any{map[string]any{"digest": map[string]string{alg: hexDigest}}},
		"predicateType": "https://sigstore.dev/cosign/sign/v1",
		"predicate":     map[string]any{},
	})
	pae := fmt.Appendf(nil, "DSSEv1 %d %s %d %s", len(inTotoPayloadType), inTotoPayloadType, len(statement), statement)
	b, _ := json.Marshal(map[string]any{
		"mediaType":            bundleMediaType,
		"verificationMaterial": map[string]any{"publicKey": map[string]string{"hint": "not read"}},
		"dsseEnvelope": map[string]any{
			"payload":     base64.StdEncoding.EncodeToString(statement),
			"payloadType": inTotoPayloadType,
			"signatures":  []any{map[string]string{"sig": base64.StdEncoding.EncodeToString(sign(pae))}},
		},
	})
	return b
}

// PushSimpleSignature signs image as cosign's older form does and pushes
// the signature manifest to its tag, sha256-<hex>.sig, beside it.
func (k *Key) PushSimpleSignature(image name.Digest, opts ...remote.Option) error {
	return k.PushSimpleSignatureTo(image, image.Context(), opts...)
}

// PushSimpleSignatureTo pushes the signature to repo, as cosign does with
// COSIGN_REPOSITORY set.
func (k *Key) PushSimpleSignatureTo(image name.Digest, repo name.Repository, opts ...remote.Option) error {
	payload := SimpleSigningPayload(image.Context().Name(), image.DigestStr())
	sig, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
		Layer:       static.NewLayer(payload, simpleSigningMediaType),
		Annotations: map[string]string{signatureAnnotation: base64.StdEncoding.EncodeToString(k.Sign(payload))},
	})
	if err != nil {
		return err
	}
	tag := repo.Tag(strings.Replace(image.DigestStr(), ":", "-", 1) + ".sig")
	return remote.Write(tag, sig, opts...)
}

// PushBundle signs image as cosign 3 does and pushes the bundle as a
// referrer of it (go-containerregistry keeps the sha256-<hex> index of a
// registry without the referrers API).
func (k *Key) PushBundle(image name.Digest, opts ...remote.Option) error {
	return k.PushBundleTo(image, image.Context(), opts...)
}

// PushBundleTo pushes the bundle to repo, as cosign does with
// COSIGN_REPOSITORY set: a referrer there of the image's digest.
func (k *Key) PushBundleTo(image name.Digest, repo name.Repository, opts ...remote.Option) error {
	desc, err := remote.Head(image, opts...)
	if err != nil {
		return err
	}
	art, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
		Layer: static.NewLayer(Bundle(k.Sign, image.DigestStr()), bundleMediaType),
	})
	if err != nil {
		return err
	}
	art = mutate.ConfigMediaType(art, types.OCIEmptyJSON)
	// cosign also sets the manifest's artifactType, which this module's
	// version of go-containerregistry cannot: the referrers list gives
	// the config's media type in its place, as a registry does.
	art = mutate.Subject(art, v1.Descriptor{MediaType: desc.MediaType, Digest: desc.Digest, Size: desc.Size}).(v1.Image)
	d, err := art.Digest()
	if err != nil {
		return err
	}
	return remote.Write(repo.Digest(d.String()), art, opts...)
}
