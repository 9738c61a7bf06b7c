package localcluster

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"testing"
)

// The apiserver tries every request's client certificate against the
// front proxy's CA first. Only the front proxy's own certificate may chain
// to it: any other would cost a signature verification on every request
// before failing on its name.
func TestOnlyTheFrontProxyChainsToTheFrontProxyCA(t *testing.T) {
	p, err := newPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	frontProxyCA := poolOf(t, p.frontProxyCAFile)
	clientCA := poolOf(t, p.caCertFile)
	clientAuth := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}

	if _, err := certOf(t, p.frontProxyCertFile).Verify(x509.VerifyOptions{Roots: frontProxyCA, KeyUsages: clientAuth}); err != nil {
		t.Errorf("the front proxy's certificate does not chain to its CA: %v", err)
	}
	for _, file := range []string{p.adminCertFile, p.servingCertFile} {
		if _, err := certOf(t, file).Verify(x509.VerifyOptions{Roots: frontProxyCA, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err == nil {
			t.Errorf("%s chains to the front proxy's CA", file)
		}
	}
	if _, err := certOf(t, p.adminCertFile).Verify(x509.VerifyOptions{Roots: clientCA, KeyUsages: clientAuth}); err != nil {
		t.Errorf("the admin's certificate does not chain to the client CA: %v", err)
	}
	if _, err := certOf(t, p.frontProxyCertFile).Verify(x509.VerifyOptions{Roots: clientCA, KeyUsages: clientAuth}); err == nil {
		t.Error("the front proxy's certificate chains to the client CA, so it authenticates as a user of its own")
	}
}

func certOf(t *testing.T, file string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s holds no PEM block", file)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func poolOf(t *testing.T, file string) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(certOf(t, file))
	return pool
}
