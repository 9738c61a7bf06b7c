package imagesig

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"strings"
	"testing"

	"github.com/modelserver-dev/modelserver-operator/internal/imagesig/sigtest"
)

const (
	digest = "sha256:2ea8c3fc1dd5559dd5726fc77465a16eef79777d923bdeba29cfd6eefa356e0e"
	other  = "sha256:0000000000000000000000000000000000000000000000000000000000000001"
)

// signer signs as cosign does with a key of its kind.
type signer struct {
	name string
	priv crypto.Signer
	sign func(msg []byte) []byte
}

func signers(t *testing.T) []signer {
	t.Helper()
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	must := func(b []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return []signer{
		{"ECDSA P-256 (cosign generate-key-pair)", p256, func(m []byte) []byte { d := sha256.Sum256(m); return must(ecdsa.SignASN1(rand.Reader, p256, d[:])) }},
		{"ECDSA P-384, SHA-384", p384, func(m []byte) []byte { d := sha512.Sum384(m); return must(ecdsa.SignASN1(rand.Reader, p384, d[:])) }},
		{"RSA PKCS #1 v1.5", rsaKey, func(m []byte) []byte {
			d := sha256.Sum256(m)
			return must(rsa.SignPKCS1v15(rand.Reader, rsaKey, crypto.SHA256, d[:]))
		}},
		{"RSA PSS (a KMS key)", rsaKey, func(m []byte) []byte {
			d := sha256.Sum256(m)
			return must(rsa.SignPSS(rand.Reader, rsaKey, crypto.SHA256, d[:], nil))
		}},
		{"Ed25519ph (cosign sign)", edKey, func(m []byte) []byte {
			d := sha512.Sum512(m)
			return must(edKey.Sign(rand.Reader, d[:], &ed25519.Options{Hash: crypto.SHA512}))
		}},
		{"Ed25519", edKey, func(m []byte) []byte { return ed25519.Sign(edKey, m) }},
	}
}

func publicPEM(t *testing.T, k crypto.Signer) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

func key(t *testing.T, k crypto.Signer) Key {
	t.Helper()
	parsed, err := ParseKey(publicPEM(t, k))
	if err != nil {
		t.Fatal(err)
	}
	return parsed
}

func simpleSigningPayload(d string) []byte {
	return sigtest.SimpleSigningPayload("registry.example.com/team/resnet", d)
}

// Each kind of key cosign signs with verifies the image in both forms,
// and names the key; another key, or another image's signature, does
// not verify it.
func TestASignatureVerifiesTheImageItNamesWithTheKeyThatMadeIt(t *testing.T) {
	stranger, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for _, s := range signers(t) {
		t.Run(s.name, func(t *testing.T) {
			k, wrong := key(t, s.priv), key(t, stranger)
			payload := simpleSigningPayload(digest)
			sig := base64.StdEncoding.EncodeToString(s.sign(payload))
			if got, err := VerifySimpleSigning([]Key{wrong, k}, payload, sig, digest); err != nil || got.ID != k.ID {
				t.Errorf("simple signing: %v, key %s; want key %s", err, got.ID, k.ID)
			}
			if got, err := VerifyBundle([]Key{wrong, k}, sigtest.Bundle(s.sign, digest), digest); err != nil || got.ID != k.ID {
				t.Errorf("bundle: %v, key %s; want key %s", err, got.ID, k.ID)
			}
			wantNot(t, "simple signing, another key", "not made by any of the keys")(VerifySimpleSigning([]Key{wrong}, payload, sig, digest))
			wantNot(t, "bundle, another key", "not made by any of the keys")(VerifyBundle([]Key{wrong}, sigtest.Bundle(s.sign, digest), digest))
			wantNot(t, "simple signing, another image", "for image "+other)(VerifySimpleSigning([]Key{k}, simpleSigningPayload(other), base64.StdEncoding.EncodeToString(s.sign(simpleSigningPayload(other))), digest))
			wantNot(t, "bundle, another image", "for "+other+", not this image")(VerifyBundle([]Key{k}, sigtest.Bundle(s.sign, other), digest))
		})
	}
}

// A signature that verifies over a payload changed afterwards, or that is
// not cosign's at all, does not verify.
func TestWhatIsNotAValidSignatureSaysWhy(t *testing.T) {
	s := signers(t)[0]
	k := key(t, s.priv)
	payload := simpleSigningPayload(digest)
	sig := base64.StdEncoding.EncodeToString(s.sign(payload))
	tampered := []byte(strings.Replace(string(payload), "resnet", "bert", 1))
	wantNot(t, "a payload changed", "not made by any of the keys")(VerifySimpleSigning([]Key{k}, tampered, sig, digest))
	wantNot(t, "not base64", "not base64")(VerifySimpleSigning([]Key{k}, payload, "%%%", digest))
	wantNot(t, "not a bundle", "not a sigstore bundle")(VerifyBundle([]Key{k}, []byte("<html>"), digest))
	wantNot(t, "a message signature", "without a DSSE envelope")(VerifyBundle([]Key{k}, []byte(`{"messageSignature":{}}`), digest))
}

func wantNot(t *testing.T, what, because string) func(Key, error) {
	return func(_ Key, err error) {
		t.Helper()
		if !errors.Is(err, ErrNotVerified) || !strings.Contains(err.Error(), because) {
			t.Errorf("%s: %v; want it not verified because %q", what, err, because)
		}
	}
}

// Keys are read as cosign writes them; others are refused saying why.
func TestKeysAreReadAsCosignWritesThem(t *testing.T) {
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalECPrivateKey(p256)
	for _, tc := range []struct {
		name, text, want string
	}{
		{"not PEM", "cosign.pub", "not PEM"},
		{"a private key", string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})), "a PEM EC PRIVATE KEY, not a PUBLIC KEY"},
		{"two keys in one item", publicPEM(t, p256) + publicPEM(t, p256), "more than one PEM block"},
		{"a small RSA key", publicPEM(t, small), "1024 bits"},
	} {
		if _, err := ParseKey(tc.text); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := ParseKeys([]string{publicPEM(t, p256), "x"}); err == nil {
		t.Error("a list with a key that does not read was read")
	} else if ke := (*KeyError)(nil); !errors.As(err, &ke) || ke.Index != 1 {
		t.Errorf("%v: want the second key named", err)
	}
	k := key(t, p256)
	if len(k.ID) != len("sha256:")+64 {
		t.Errorf("key ID %q", k.ID)
	}
}
