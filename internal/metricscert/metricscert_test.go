package metricscert

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/modelserver-dev/modelserver-operator/internal/servingtls/tlstest"
)

// service is the name a scraper verifies the metrics endpoint by.
const service = "modelserver-controller-manager-metrics-service.modelserver-system.svc"

// clock is a Source's time, moved on by the tests.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// waitOut moves the clock past the time the files are left unread.
func (c *clock) waitOut() { c.t = c.t.Add(RecheckAfter) }
func newSource(t *testing.T, dir string) (*Source, *clock) {
	t.Helper()
	s, err := New(dir, testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)}
	s.now = c.now
	return s, c
}

// handshake is a scraper's TLS handshake with a metrics server whose
// certificate comes from s, verifying it with the CA ca (nil: not
// verifying); it returns the certificate the server sent, or the error.
func handshake(t *testing.T, s *Source, ca *tlstest.Cert) (*x509.Certificate, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	s.TLSOption(cfg)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer func() { _ = conn.Close() }()
		_ = tls.Server(conn, cfg).Handshake()
	}()
	client := &tls.Config{ServerName: service, InsecureSkipVerify: ca == nil, MinVersion: tls.VersionTLS12} //nolint:gosec // a scraper that does not verify, as insecureSkipVerify has it
	if ca != nil {
		client.RootCAs = ca.Pool()
	}
	conn, err := tls.Dial("tcp", ln.Addr().String(), client)
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0], nil
}

func TestWithoutADirectoryTheCertificateIsSelfSigned(t *testing.T) {
	s, _ := newSource(t, "")
	got, err := handshake(t, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !selfSigned(got) {
		t.Errorf("served %s issued by %s, want the self-signed localhost", got.Subject, got.Issuer)
	}
	if _, err := handshake(t, s, tlstest.CA(t, "some CA")); err == nil {
		t.Error("a scraper that verifies the endpoint trusts the self-signed certificate")
	}
}

// The Secret's certificate is served once its files are there, even if it
// was created after the operator started, and a scraper that trusts its
// CA verifies the endpoint by the Service's name.
func TestTheSecretsCertificateIsServedOnceItIsMounted(t *testing.T) {
	dir := t.TempDir()
	s, clk := newSource(t, dir)
	if got, err := handshake(t, s, nil); err != nil || !selfSigned(got) {
		t.Fatalf("before the Secret: %v; want the self-signed certificate", err)
	}
	ca := tlstest.CA(t, "cert-manager")
	ca.Server(t, service).WriteTo(t, dir)
	if _, err := handshake(t, s, ca); err == nil {
		t.Errorf("the files were read again within %s of the last look", RecheckAfter)
	}
	clk.waitOut()
	got, err := handshake(t, s, ca)
	if err != nil {
		t.Fatalf("a scraper trusting the Secret's CA: %v", err)
	}
	if got.DNSNames[0] != service {
		t.Errorf("served %v", got.DNSNames)
	}
}

// A rotated certificate is served once the files change; files that are
// gone, unreadable or invalid (a key of another certificate) leave the
// last good one served.
func TestARotatedCertificateIsServedAndABrokenOneIsNot(t *testing.T) {
	dir := t.TempDir()
	old, rotated := tlstest.CA(t, "old CA"), tlstest.CA(t, "new CA")
	old.Server(t, service).WriteTo(t, dir)
	s, clk := newSource(t, dir)
	if _, err := handshake(t, s, old); err != nil {
		t.Fatal(err)
	}
	rotated.Server(t, service).WriteTo(t, dir)
	clk.waitOut()
	if _, err := handshake(t, s, rotated); err != nil {
		t.Fatalf("after the rotation: %v", err)
	}

	other := rotated.Server(t, "other")
	keyOfAnother := t.TempDir()
	_, otherKey := other.WriteTo(t, keyOfAnother)
	for name, breakIt := range map[string]func(){
		"a key of another certificate": func() { copyFile(t, otherKey, filepath.Join(dir, KeyFile)) },
		"not PEM":                      func() { writeFile(t, filepath.Join(dir, CertFile), "not a certificate") },
		"gone":                         func() { removeFile(t, filepath.Join(dir, CertFile)) },
	} {
		t.Run(name, func(t *testing.T) {
			rotated.Server(t, service).WriteTo(t, dir)
			clk.waitOut()
			good, err := handshake(t, s, rotated)
			if err != nil {
				t.Fatal(err)
			}
			breakIt()
			clk.waitOut()
			got, err := handshake(t, s, rotated)
			if err != nil || !got.Equal(good) {
				t.Errorf("served another certificate than the last good one (%v)", err)
			}
		})
	}
}

// selfSigned: the certificate controller-runtime's metrics server would
// make itself, which client-go names localhost@<time>.
func selfSigned(c *x509.Certificate) bool {
	return strings.HasPrefix(c.Subject.CommonName, "localhost@") && c.Issuer.CommonName != ""
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, string(b))
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func removeFile(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}
