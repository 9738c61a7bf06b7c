package localcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the set of credentials one cluster needs: a CA that signs the
// apiserver's serving certificate and an admin client certificate, and the
// key pair the apiserver signs and verifies ServiceAccount tokens with.
type pki struct {
	caCertFile      string
	caKeyFile       string
	servingCertFile string
	servingKeyFile  string
	adminCertFile   string
	adminKeyFile    string
	saKeyFile       string
	saPubFile       string
	// The aggregator's client certificate, which extension apiservers
	// (OLM's packageserver) trust through requestheader-client-ca-file.
	frontProxyCertFile string
	frontProxyKeyFile  string

	caPEM       []byte
	adminCert   []byte
	adminKeyPEM []byte

	// The CA, kept to issue the real node's client certificates.
	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
	dir   string
}

// frontProxyClientName is the aggregator's client certificate's name.
const frontProxyClientName = "front-proxy-client"

func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{
		caCertFile:         filepath.Join(dir, "ca.crt"),
		caKeyFile:          filepath.Join(dir, "ca.key"),
		servingCertFile:    filepath.Join(dir, "apiserver.crt"),
		servingKeyFile:     filepath.Join(dir, "apiserver.key"),
		adminCertFile:      filepath.Join(dir, "admin.crt"),
		adminKeyFile:       filepath.Join(dir, "admin.key"),
		saKeyFile:          filepath.Join(dir, "sa.key"),
		saPubFile:          filepath.Join(dir, "sa.pub"),
		frontProxyCertFile: filepath.Join(dir, "front-proxy-client.crt"),
		frontProxyKeyFile:  filepath.Join(dir, "front-proxy-client.key"),
		dir:                dir,
	}

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := certTemplate(pkix.Name{CommonName: "localcluster-ca"})
	caTmpl.IsCA = true
	caTmpl.BasicConstraintsValid = true
	caTmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("create CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	p.ca, p.caKey = caCert, caKey
	p.caPEM = pemBlock("CERTIFICATE", caDER)
	if err := os.WriteFile(p.caCertFile, p.caPEM, 0o600); err != nil {
		return nil, err
	}
	caKeyDER, err := x509.MarshalECPrivateKey(caKey)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.caKeyFile, pemBlock("EC PRIVATE KEY", caKeyDER), 0o600); err != nil {
		return nil, err
	}

	serving := certTemplate(pkix.Name{CommonName: "kube-apiserver"})
	serving.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	serving.DNSNames = []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	// Loopback for the kwok-only cluster; with a real node the apiserver
	// listens on the host's bridge address, and pods reach it through the
	// kubernetes Service.
	serving.IPAddresses = []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(HostAddress), net.ParseIP(kubernetesServiceIP)}
	if _, _, err := p.issue(serving, caCert, caKey, p.servingCertFile, p.servingKeyFile); err != nil {
		return nil, fmt.Errorf("issue serving certificate: %w", err)
	}

	// system:masters bypasses RBAC; the control-plane components and the
	// test's own clients use this identity. Code under test that must be
	// held to least privilege impersonates or uses a ServiceAccount token.
	admin := certTemplate(pkix.Name{CommonName: "localcluster-admin", Organization: []string{"system:masters"}})
	admin.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if p.adminCert, p.adminKeyPEM, err = p.issue(admin, caCert, caKey, p.adminCertFile, p.adminKeyFile); err != nil {
		return nil, fmt.Errorf("issue admin certificate: %w", err)
	}

	// One CA for the aggregator's identity too: requestheader-allowed-names
	// keeps other certificates of this CA from asserting a user in headers.
	frontProxy := certTemplate(pkix.Name{CommonName: frontProxyClientName})
	frontProxy.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if _, _, err := p.issue(frontProxy, caCert, caKey, p.frontProxyCertFile, p.frontProxyKeyFile); err != nil {
		return nil, fmt.Errorf("issue front-proxy client certificate: %w", err)
	}

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	saKeyDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return nil, err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.saKeyFile, pemBlock("EC PRIVATE KEY", saKeyDER), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.saPubFile, pemBlock("PUBLIC KEY", saPubDER), 0o600); err != nil {
		return nil, err
	}
	return p, nil
}

// issueClient issues a client certificate for a component that must act
// as itself (the kubelet as system:node:<name>, kube-proxy as
// system:kube-proxy) rather than as the admin.
func (p *pki) issueClient(file, cn string, orgs ...string) (certPEM, keyPEM []byte, err error) {
	tmpl := certTemplate(pkix.Name{CommonName: cn, Organization: orgs})
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return p.issue(tmpl, p.ca, p.caKey, filepath.Join(p.dir, file+".crt"), filepath.Join(p.dir, file+".key"))
}

// issue signs tmpl with the CA and writes the certificate and key to the given
// files, returning both PEM-encoded.
func (p *pki) issue(tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey, certFile, keyFile string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	certPEM, keyPEM = pemBlock("CERTIFICATE", der), pemBlock("EC PRIVATE KEY", keyDER)
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

func certTemplate(subject pkix.Name) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
}

func pemBlock(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}
