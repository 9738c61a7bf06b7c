// Package metricscert gives the operator's metrics endpoint its
// certificate: the one in a directory a Secret is mounted at (issued by
// cert-manager, or by OpenShift's service CA for the metrics Service),
// read again when it is rotated, or created after the pod started; until
// there is one, a self-signed certificate, as controller-runtime's metrics
// server makes. A scraper that verifies the endpoint trusts the issuer's
// CA; one that does not verify it scrapes either.
package metricscert

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	certutil "k8s.io/client-go/util/cert"
)

// The files of a kubernetes.io/tls Secret the certificate is read from.
const (
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
)

// RecheckAfter is how long the files are left unread after a look at
// them: the kubelet swaps a Secret volume's files whole, a minute or so
// after the Secret changes (or is created), so a rotation is served within
// seconds of reaching the pod, and a handshake costs no file read.
const RecheckAfter = 10 * time.Second

// Source serves the directory's certificate when it has a valid one, and
// the self-signed one until then.
type Source struct {
	dir        string
	log        logr.Logger
	selfSigned *tls.Certificate
	now        func() time.Time

	mu      sync.Mutex
	checked time.Time
	read    []byte // the cert and key files' contents, as last read
	served  *tls.Certificate
}

// New makes the self-signed certificate and returns a Source of dir's
// certificate ("" for none: the self-signed one only).
func New(dir string, log logr.Logger) (*Source, error) {
	cert, key, err := certutil.GenerateSelfSignedCertKeyWithFixtures("localhost", []net.IP{{127, 0, 0, 1}}, nil, "")
	if err != nil {
		return nil, fmt.Errorf("make the metrics endpoint's self-signed certificate: %w", err)
	}
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("make the metrics endpoint's self-signed certificate: %w", err)
	}
	return &Source{dir: dir, log: log, selfSigned: &pair, now: time.Now}, nil
}

// GetCertificate is tls.Config's: the certificate for a handshake.
func (s *Source) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dir != "" && (s.checked.IsZero() || s.now().Sub(s.checked) >= RecheckAfter) {
		s.checked = s.now()
		s.reread()
	}
	if s.served == nil {
		return s.selfSigned, nil
	}
	return s.served, nil
}

// reread reads the files, and serves their certificate when they changed
// and hold a valid one. Files that are gone or invalid leave the
// certificate served as it was: a Secret deleted or half-written by hand
// does not take the endpoint down, nor back to a certificate its
// scrapers no longer trust.
func (s *Source) reread() {
	cert, certErr := os.ReadFile(filepath.Join(s.dir, CertFile))
	key, keyErr := os.ReadFile(filepath.Join(s.dir, KeyFile))
	if err := errors.Join(certErr, keyErr); err != nil {
		if !errors.Is(err, fs.ErrNotExist) || s.served != nil {
			s.logOnce(cert, key, "the metrics endpoint's certificate cannot be read; the one served is kept", err)
		}
		return
	}
	if read := append(bytes.Clone(cert), key...); !bytes.Equal(read, s.read) {
		s.read = read
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			s.log.Error(err, "the metrics endpoint's certificate is invalid; the one served is kept", "dir", s.dir)
			return
		}
		s.served = &pair
		s.log.Info("serving the metrics endpoint's certificate", "dir", s.dir, "subject", pair.Leaf.Subject.String(),
			"dnsNames", pair.Leaf.DNSNames, "notAfter", pair.Leaf.NotAfter)
	}
}

// logOnce logs an unreadable certificate once until what is read changes.
func (s *Source) logOnce(cert, key []byte, msg string, err error) {
	read := append(append([]byte("unreadable:"), cert...), key...)
	if !bytes.Equal(read, s.read) {
		s.read = read
		s.log.Error(err, msg, "dir", s.dir)
	}
}

// TLSOption sets a tls.Config to take its certificate from s: an option
// for controller-runtime's metrics server, which then neither makes its
// own nor watches a directory of its own.
func (s *Source) TLSOption(c *tls.Config) {
	c.GetCertificate = s.GetCertificate
}
