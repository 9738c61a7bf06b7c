// Package tlstest makes certificates for tests: a CA, and the server and
// client certificates it signs, each with its key, in PEM.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Cert is a certificate and its key.
type Cert struct {
	CertPEM, KeyPEM []byte
	Cert            *x509.Certificate
	key             *ecdsa.PrivateKey
}

// TLS is c as a crypto/tls certificate.
func (c *Cert) TLS() tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{c.Cert.Raw}, PrivateKey: c.key, Leaf: c.Cert}
}

// WriteTo writes c's certificate and key into dir as tls.crt and tls.key,
// as a kubernetes.io/tls Secret's volume holds them, and returns their
// paths.
func (c *Cert) WriteTo(t testing.TB, dir string) (cert, key string) {
	t.Helper()
	cert, key = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for path, data := range map[string][]byte{cert: c.CertPEM, key: c.KeyPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return cert, key
}

// Pool is a pool of c alone, to trust it.
func (c *Cert) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.Cert)
	return p
}

var serial = big.NewInt(time.Now().UnixNano())

// CA is a self-signed CA, valid for a day.
func CA(t testing.TB, name string) *Cert {
	t.Helper()
	return issue(t, &x509.Certificate{
		Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}, nil)
}

// Intermediate is a CA that ca signs.
func (ca *Cert) Intermediate(t testing.TB, name string) *Cert {
	t.Helper()
	return issue(t, &x509.Certificate{
		Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}, ca)
}

// Server is a server certificate ca signs for the names (DNS names, or IP
// addresses where they parse as one).
func (ca *Cert) Server(t testing.TB, names ...string) *Cert {
	t.Helper()
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: names[0]},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	return issue(t, tmpl, ca)
}

// SelfSigned is a server certificate for the names that signs itself, as
// kubectl create secret tls is often given, with no CA beside it.
func SelfSigned(t testing.TB, names ...string) *Cert {
	t.Helper()
	return issue(t, &x509.Certificate{
		Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, nil)
}

// Client is a client certificate ca signs.
func (ca *Cert) Client(t testing.TB, name string) *Cert {
	t.Helper()
	return issue(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca)
}

func issue(t testing.TB, tmpl *x509.Certificate, parent *Cert) *Cert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = new(big.Int).Set(serial.Add(serial, big.NewInt(1)))
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	signer, signerCert := key, tmpl
	if parent != nil {
		signer, signerCert = parent.key, parent.Cert
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return &Cert{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		Cert:    cert,
		key:     key,
	}
}
