// Package imagesig checks cosign signatures of an image with public keys:
// that a model image was signed by a key its owner trusts, before any of
// it is written. It reads both forms cosign stores signatures in, and
// checks the signature and the digest it names, not a transparency log
// or a certificate: keys, not identities.
//
// It uses only the standard library: the operator links it to check the
// keys of a spec, the fetcher to check signatures.
package imagesig

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
)

// Key is a public key a signature may be made with.
type Key struct {
	pub crypto.PublicKey
	// ID names the key in messages, logs and the status: "sha256:" and
	// the hex of the sha256 of its DER form (openssl pkey -pubin -in
	// cosign.pub -outform DER | sha256sum).
	ID string
}

// ParseKey reads a PEM public key (-----BEGIN PUBLIC KEY-----, as cosign
// generate-key-pair writes cosign.pub): ECDSA on P-256, P-384 or P-521,
// RSA of at least 2048 bits, or Ed25519.
func ParseKey(text string) (Key, error) {
	block, rest := pem.Decode([]byte(text))
	if block == nil {
		return Key{}, fmt.Errorf("not PEM: want -----BEGIN PUBLIC KEY-----")
	}
	if block.Type != "PUBLIC KEY" {
		return Key{}, fmt.Errorf("a PEM %s, not a PUBLIC KEY", block.Type)
	}
	if more, _ := pem.Decode(rest); more != nil {
		return Key{}, fmt.Errorf("more than one PEM block: give each key as an item of its own")
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return Key{}, fmt.Errorf("not a public key: %v", err)
	}
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if n := k.Curve.Params().BitSize; n != 256 && n != 384 && n != 521 {
			return Key{}, fmt.Errorf("an ECDSA key on a %d-bit curve: want P-256, P-384 or P-521", n)
		}
	case *rsa.PublicKey:
		if n := k.N.BitLen(); n < 2048 {
			return Key{}, fmt.Errorf("an RSA key of %d bits: want at least 2048", n)
		}
	case ed25519.PublicKey:
	default:
		return Key{}, fmt.Errorf("a %T key: want ECDSA, RSA or Ed25519", pub)
	}
	sum := sha256.Sum256(block.Bytes)
	return Key{pub: pub, ID: "sha256:" + hex.EncodeToString(sum[:])}, nil
}

// ParseKeys reads each key of a list; the error names the first that
// does not read, by its index.
func ParseKeys(texts []string) ([]Key, error) {
	keys := make([]Key, 0, len(texts))
	for i, t := range texts {
		k, err := ParseKey(t)
		if err != nil {
			return nil, &KeyError{Index: i, Err: err}
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// KeyError says which key of a list does not read.
type KeyError struct {
	Index int
	Err   error
}

func (e *KeyError) Error() string { return fmt.Sprintf("key %d: %v", e.Index, e.Err) }
func (e *KeyError) Unwrap() error { return e.Err }
