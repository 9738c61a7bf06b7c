// Package servingtls turns the certificate and key of spec.tls's Secret
// into the SSL config TF Serving reads with --ssl_config_file, and checks
// them first: TF Serving aborts on a config it cannot parse and fails to
// start on a key that does not match its certificate, so the operator
// refuses such a Secret before any pod is rolled, and the serving pods'
// init container refuses it again should it change in between.
//
// It uses only the standard library: the fetcher links it.
package servingtls

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"

	"github.com/modelserver-dev/modelserver-operator/internal/pbtext"
)

// The keys of a kubernetes.io/tls Secret the pods use.
const (
	CertKey = "tls.crt"
	KeyKey  = "tls.key"
	CAKey   = "ca.crt"
)

// Files are the Secret's contents, PEM; CA may be empty when clients are
// not asked for certificates.
type Files struct {
	Cert, Key, CA []byte
}

// Check says what TF Serving could not serve from f, or "": a certificate
// chain and the private key of its first certificate, and, where clients
// must present a certificate (requireClient), the CAs that sign theirs.
// With no problem it gives that first certificate, the server's, as parsed
// for the check.
func Check(f Files, requireClient bool) (server *x509.Certificate, problem string) {
	if len(f.Cert) == 0 {
		return nil, CertKey + " is empty"
	}
	if len(f.Key) == 0 {
		return nil, KeyKey + " is empty"
	}
	pair, err := tls.X509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, CertKey + " and " + KeyKey + ": " + strings.TrimPrefix(err.Error(), "tls: ")
	}
	if requireClient {
		if len(f.CA) == 0 {
			return nil, CAKey + " is missing or empty: clientAuth Require needs the CA certificates that sign the clients' certificates"
		}
		if problem := CheckCA(f.CA); problem != "" {
			return nil, CAKey + ": " + problem
		}
	}
	return pair.Leaf, ""
}

// CheckCA says why ca, the CAs of the clients' certificates, is not
// one or more PEM certificates, or "".
func CheckCA(ca []byte) string {
	if n, problem := certificates(ca); problem != "" {
		return problem
	} else if n == 0 {
		return "no CERTIFICATE block in PEM"
	}
	return ""
}

// certificates counts the certificates of a PEM bundle, or says which
// block is not one.
func certificates(data []byte) (int, string) {
	n := 0
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return n, ""
		}
		if block.Type != "CERTIFICATE" {
			return n, fmt.Sprintf("block %d is a %s, not a CERTIFICATE", n+1, block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return n, fmt.Sprintf("certificate %d: %v", n+1, err)
		}
		n++
	}
}

// SSLConfig is TF Serving's SSLConfig message, in text format, serving f:
// with requireClient, gRPC asks every client for a certificate and verifies
// it against f.CA.
func SSLConfig(f Files, requireClient bool) string {
	var b strings.Builder
	b.WriteString("server_key: " + pbtext.Quote(string(f.Key)) + "\n")
	b.WriteString("server_cert: " + pbtext.Quote(string(f.Cert)) + "\n")
	if requireClient {
		b.WriteString("custom_ca: " + pbtext.Quote(string(f.CA)) + "\n")
		b.WriteString("client_verify: true\n")
	}
	return b.String()
}
