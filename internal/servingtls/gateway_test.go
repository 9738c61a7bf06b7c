package servingtls

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/modelserver-dev/modelserver-operator/internal/servingtls/tlstest"
)

func TestTrustForNamesTheCertificatesHostnameAndIssuer(t *testing.T) {
	services := []string{"m.ml.svc", "m.ml.svc.cluster.local", "m.ml", "m"}
	issuer, other := tlstest.CA(t, "issuer"), tlstest.CA(t, "other")
	intermediate := issuer.Intermediate(t, "intermediate")
	selfSigned := tlstest.SelfSigned(t, "m.ml.svc")
	chained := intermediate.Server(t, "m.ml.svc")
	join := func(pems ...[]byte) []byte { return bytes.Join(pems, nil) }
	for _, c := range []struct {
		name         string
		cert, ca     []byte
		server       *x509.Certificate
		wantHostname string
		wantCA       []byte
	}{
		{name: "the Service's short in-cluster name first", cert: issuer.Server(t, "m.ml.svc.cluster.local", "m.ml.svc").CertPEM, ca: issuer.CertPEM,
			wantHostname: "m.ml.svc", wantCA: issuer.CertPEM},
		{name: "the cluster's full name where it is the one named", cert: issuer.Server(t, "other.example.com", "m.ml.svc.cluster.local").CertPEM, ca: issuer.CertPEM,
			wantHostname: "m.ml.svc.cluster.local", wantCA: issuer.CertPEM},
		{name: "a wildcard of the namespace", cert: issuer.Server(t, "*.ml.svc").CertPEM, ca: issuer.CertPEM,
			wantHostname: "m.ml.svc", wantCA: issuer.CertPEM},
		{name: "a name of its own, no Service's", cert: issuer.Server(t, "models.example.com", "*.example.com").CertPEM, ca: issuer.CertPEM,
			wantHostname: "models.example.com", wantCA: issuer.CertPEM},
		{name: "a wildcard alone gives the Service's name under it", cert: issuer.Server(t, "*.example.com").CertPEM, ca: issuer.CertPEM,
			wantHostname: "m.example.com", wantCA: issuer.CertPEM},
		{name: "a ca.crt that signs another certificate is no issuer of this one", cert: issuer.Server(t, "m.ml.svc").CertPEM, ca: other.CertPEM,
			wantHostname: "m.ml.svc"},
		{name: "no ca.crt: a CA the Gateway knows", cert: join(issuer.Server(t, "m.ml.svc").CertPEM, issuer.CertPEM),
			wantHostname: "m.ml.svc"},
		{name: "a self-signed certificate is its own CA", cert: selfSigned.CertPEM,
			wantHostname: "m.ml.svc", wantCA: selfSigned.CertPEM},
		{name: "a root in ca.crt, its intermediate in the chain", cert: join(chained.CertPEM, intermediate.CertPEM), ca: issuer.CertPEM, server: chained.Cert,
			wantHostname: "m.ml.svc", wantCA: issuer.CertPEM},
	} {
		t.Run(c.name, func(t *testing.T) {
			server := c.server
			if server == nil {
				server = parse(t, c.cert)
			}
			got, problem := TrustFor(Files{Cert: c.cert, CA: c.ca}, server, services)
			if problem != "" || got.Hostname != c.wantHostname || !bytes.Equal(got.CA, c.wantCA) {
				t.Fatalf("TrustFor = {%s, %d bytes of CA} (%q), want {%s, %d bytes}", got.Hostname, len(got.CA), problem, c.wantHostname, len(c.wantCA))
			}
			if got.CA == nil {
				return
			}
			// What a Gateway would do with it: ask for the name, check
			// the chain the port serves against the CAs.
			roots, intermediates := x509.NewCertPool(), x509.NewCertPool()
			roots.AppendCertsFromPEM(got.CA)
			intermediates.AppendCertsFromPEM(c.cert)
			if _, err := server.Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates, DNSName: got.Hostname}); err != nil {
				t.Errorf("a Gateway given this trust refuses the certificate: %v", err)
			}
		})
	}
}

func TestTrustForRefusesACertificateWithNoDNSName(t *testing.T) {
	cert := tlstest.CA(t, "issuer").Server(t, "198.18.0.5")
	_, problem := TrustFor(Files{Cert: cert.CertPEM}, cert.Cert, []string{"m.ml.svc"})
	if !strings.Contains(problem, "names no DNS name") {
		t.Errorf("problem = %q", problem)
	}
}

func parse(t *testing.T, chain []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(chain)
	if block == nil {
		t.Fatal("no PEM")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
