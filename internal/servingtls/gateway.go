package servingtls

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"strings"
)

// GatewayTrust is what a Gateway needs to speak TLS to the gRPC port and
// check the certificate it serves (a BackendTLSPolicy's validation): the
// name it asks for the certificate by (SNI) and checks it against, and
// the PEM of the CA certificates that sign it, nil where its issuer is
// none of the Secret's and so must be one Gateways know already (a public
// CA's).
type GatewayTrust struct {
	Hostname string
	CA       []byte
}

// TrustFor says how a Gateway can trust server, the first certificate of
// f.Cert, reached through a Service whose DNS names are services, most
// wanted first; or why it cannot (a problem, for a message).
//
// The hostname is the first of the Service's names the certificate is
// valid for, else its first DNS name, else the Service's first name under
// a wildcard it has (*.example.com gives <service>.example.com): the
// Gateway dials the Service whatever the name, which serves only to ask
// for the certificate and to check it. The CAs are f.CA where they sign
// server (cert-manager's ca.crt), server itself where it signs itself.
func TrustFor(f Files, server *x509.Certificate, services []string) (trust GatewayTrust, problem string) {
	trust.Hostname = hostnameFor(server, services)
	if trust.Hostname == "" {
		return GatewayTrust{}, "its certificate names no DNS name (only IP addresses, or a common name alone), and a Gateway checks a backend's certificate by one"
	}
	switch {
	case len(f.CA) > 0 && signs(f.CA, f.Cert, server):
		trust.CA = f.CA
	case selfSigned(server):
		trust.CA = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Raw})
	}
	return trust, ""
}

func hostnameFor(server *x509.Certificate, services []string) string {
	for _, s := range services {
		if server.VerifyHostname(s) == nil {
			return s
		}
	}
	for _, n := range server.DNSNames {
		if !strings.Contains(n, "*") {
			return n
		}
	}
	if len(services) == 0 {
		return ""
	}
	short, _, _ := strings.Cut(services[0], ".")
	for _, n := range server.DNSNames {
		if domain, ok := strings.CutPrefix(n, "*."); ok && server.VerifyHostname(short+"."+domain) == nil {
			return short + "." + domain
		}
	}
	return ""
}

// signs says that the CA certificates of bundle, with the intermediates
// that follow server in chain, verify server. Its validity is not what is
// asked (expiry is warned of apart): the check is made at its midpoint.
func signs(bundle, chain []byte, server *x509.Certificate) bool {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		return false
	}
	intermediates := x509.NewCertPool()
	for rest := chain; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil && !bytes.Equal(c.Raw, server.Raw) {
			intermediates.AddCert(c)
		}
	}
	_, err := server.Verify(x509.VerifyOptions{
		Roots: roots, Intermediates: intermediates,
		CurrentTime: server.NotBefore.Add(server.NotAfter.Sub(server.NotBefore) / 2),
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	})
	return err == nil
}

// selfSigned says c signs itself. CheckSignatureFrom would ask c to be a
// CA too, which a self-signed server certificate need not be.
func selfSigned(c *x509.Certificate) bool {
	return bytes.Equal(c.RawIssuer, c.RawSubject) && c.CheckSignature(c.SignatureAlgorithm, c.RawTBSCertificate, c.Signature) == nil
}
