package imagesig

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"strings"
)

// What cosign stores, and how.
const (
	// SimpleSigningMediaType is the media type of a layer of the
	// signature manifest tagged sha256-<hex>.sig: its blob is the payload
	// signed, and AnnotationSignature its signature.
	SimpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	AnnotationSignature    = "dev.cosignproject.cosign/signature"
	// BundleMediaTypePrefix starts the media type of a sigstore bundle, the
	// layer of a referrer of the image (cosign 3 signs so by default).
	BundleMediaTypePrefix = "application/vnd.dev.sigstore.bundle"
	// SignatureTagSuffix ends the tag of the older form's signatures.
	SignatureTagSuffix = ".sig"
)

// ErrNotVerified is wrapped by every failure to verify a signature.
var ErrNotVerified = errors.New("not verified")

// notVerified says why one signature does not verify the image.
func notVerified(format string, args ...any) error {
	return &verifyError{fmt.Sprintf(format, args...)}
}

// verifyError is ErrNotVerified in the words of one signature.
type verifyError struct{ why string }

func (e *verifyError) Error() string        { return e.why }
func (e *verifyError) Is(target error) bool { return target == ErrNotVerified }

// VerifySimpleSigning checks a signature of cosign's older form: sig
// (base64, from the layer's annotation) must be one of keys' over
// payload, and payload must name digest ("sha256:<hex>") as the image it
// signs. It returns the key that made it.
func VerifySimpleSigning(keys []Key, payload []byte, sig, digest string) (Key, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(sig))
	if err != nil {
		return Key{}, notVerified("its signature is not base64")
	}
	k, ok := signedBy(keys, payload, raw)
	if !ok {
		return Key{}, notVerified("not made by any of the keys")
	}
	var claim struct {
		Critical struct {
			Image struct {
				Digest string `json:"docker-manifest-digest"`
			} `json:"image"`
		} `json:"critical"`
	}
	if err := json.Unmarshal(payload, &claim); err != nil {
		return Key{}, notVerified("its payload is not cosign's JSON: %v", err)
	}
	if got := claim.Critical.Image.Digest; got != digest {
		return Key{}, notVerified("made by key %s for image %s, not this one", k.ID, orNone(got))
	}
	return k, nil
}

// VerifyBundle checks a sigstore bundle (JSON) as cosign 3 writes it
// when signing an image: a DSSE envelope whose one signature must be one
// of keys' over the envelope's pre-authentication encoding, and whose
// in-toto statement must name digest among its subjects. Neither a
// transparency log entry nor a certificate is looked at.
func VerifyBundle(keys []Key, bundle []byte, digest string) (Key, error) {
	var b struct {
		DSSE *struct {
			Payload     string `json:"payload"`
			PayloadType string `json:"payloadType"`
			Signatures  []struct {
				Sig string `json:"sig"`
			} `json:"signatures"`
		} `json:"dsseEnvelope"`
	}
	if err := json.Unmarshal(bundle, &b); err != nil {
		return Key{}, notVerified("not a sigstore bundle: %v", err)
	}
	if b.DSSE == nil {
		return Key{}, notVerified("a bundle without a DSSE envelope (a message signature signs a blob, not an image)")
	}
	if n := len(b.DSSE.Signatures); n != 1 {
		return Key{}, notVerified("a DSSE envelope of %d signatures, want 1", n)
	}
	payload, err := base64.StdEncoding.DecodeString(b.DSSE.Payload)
	if err != nil {
		return Key{}, notVerified("its DSSE payload is not base64")
	}
	sig, err := base64.StdEncoding.DecodeString(b.DSSE.Signatures[0].Sig)
	if err != nil {
		return Key{}, notVerified("its DSSE signature is not base64")
	}
	k, ok := signedBy(keys, pae(b.DSSE.PayloadType, payload), sig)
	if !ok {
		return Key{}, notVerified("not made by any of the keys")
	}
	if b.DSSE.PayloadType != "application/vnd.in-toto+json" {
		return Key{}, notVerified("made by key %s over a %q payload, not an in-toto statement", k.ID, b.DSSE.PayloadType)
	}
	var statement struct {
		Subject []struct {
			Digest map[string]string `json:"digest"`
		} `json:"subject"`
	}
	if err := json.Unmarshal(payload, &statement); err != nil {
		return Key{}, notVerified("made by key %s over a statement that is not JSON: %v", k.ID, err)
	}
	alg, hexDigest, _ := strings.Cut(digest, ":")
	var named []string
	for _, s := range statement.Subject {
		if s.Digest[alg] == hexDigest {
			return k, nil
		}
		if d := s.Digest[alg]; d != "" {
			named = append(named, alg+":"+d)
		}
	}
	return Key{}, notVerified("made by key %s for %s, not this image", k.ID, orNone(strings.Join(named, ", ")))
}

// pae is DSSE's pre-authentication encoding, what its signatures sign.
func pae(payloadType string, payload []byte) []byte {
	return fmt.Appendf(nil, "DSSEv1 %d %s %d %s", len(payloadType), payloadType, len(payload), payload)
}

// signedBy finds the key of keys that made sig over msg. Each key is
// tried as cosign signs with it: ECDSA over the sha256 of the message (or
// its curve's own hash), RSA PKCS #1 v1.5 or PSS over its sha256, Ed25519
// over the message or (cosign's Ed25519ph) its sha512.
func signedBy(keys []Key, msg, sig []byte) (Key, bool) {
	for _, k := range keys {
		if verifies(k.pub, msg, sig) {
			return k, true
		}
	}
	return Key{}, false
}

func verifies(pub crypto.PublicKey, msg, sig []byte) bool {
	switch p := pub.(type) {
	case *ecdsa.PublicKey:
		hashes := []func() hash.Hash{sha256.New}
		switch p.Curve.Params().BitSize {
		case 384:
			hashes = append(hashes, sha512.New384)
		case 521:
			hashes = append(hashes, sha512.New)
		}
		for _, h := range hashes {
			if ecdsa.VerifyASN1(p, sum(h, msg), sig) {
				return true
			}
		}
	case *rsa.PublicKey:
		d := sum(sha256.New, msg)
		return rsa.VerifyPKCS1v15(p, crypto.SHA256, d, sig) == nil || rsa.VerifyPSS(p, crypto.SHA256, d, sig, nil) == nil
	case ed25519.PublicKey:
		return ed25519.Verify(p, msg, sig) ||
			ed25519.VerifyWithOptions(p, sum(sha512.New, msg), sig, &ed25519.Options{Hash: crypto.SHA512}) == nil
	}
	return false
}

func sum(h func() hash.Hash, msg []byte) []byte {
	d := h()
	d.Write(msg)
	return d.Sum(nil)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
