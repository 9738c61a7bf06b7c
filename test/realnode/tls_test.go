package realnode

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelserver-dev/modelserver-operator/internal/servingtls/tlstest"
	"github.com/modelserver-dev/modelserver-operator/test/realenv"
)

// TestGRPCIsServedOverTLSAndARenewedCertificateRollsThePods: with spec.tls
// (clientAuth Require), the serving pods' tls-config init container writes
// the SSL config from the Secret and the server (the double) serves its
// certificate on the gRPC port, through the Service, to clients with a
// certificate of the Secret's CA alone. cert-manager renews by updating the
// Secret: the pods roll, and the new certificate is served. Then
// spec.tls.clientCA names a ConfigMap of another CA, whose clients alone
// are let in; the ConfigMap rotated (a next CA added) rolls the pods onto
// it.
func TestGRPCIsServedOverTLSAndARenewedCertificateRollsThePods(t *testing.T) {
	t.Parallel()
	e := realNode(t)
	ns := e.namespace(t)
	issuer, clients := tlstest.CA(t, "issuer"), tlstest.CA(t, "clients")
	host := "secure." + ns + ".svc"
	secret := func(server *tlstest.Cert) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secure-grpc"},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{corev1.TLSCertKey: server.CertPEM, corev1.TLSPrivateKeyKey: server.KeyPEM, "ca.crt": clients.CertPEM},
		}
	}
	first := issuer.Server(t, host)
	ctx := context.Background()
	if _, err := e.cs.CoreV1().Secrets(ns).Create(ctx, secret(first), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.kubectl(t, e.ModelServerYAML(realenv.ModelServer{Name: "secure", URI: halfPlusTwo,
		SpecExtra: "  tls:\n    secretName: secure-grpc\n    clientAuth: Require\n"}), "-n", ns, "apply", "-f", "-")
	e.waitReady(t, ns, "secure", 3*time.Minute)

	s, err := e.cs.CoreV1().Services(ns).Get(ctx, "secure", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(s.Spec.ClusterIP, "8500")
	trusting := &tls.Config{RootCAs: issuer.Pool(), ServerName: host, MinVersion: tls.VersionTLS12}
	withCert := trusting.Clone()
	withCert.Certificates = []tls.Certificate{clients.Client(t, "app").TLS()}
	// served dials the gRPC port through the Service, as a client with
	// cfg, and says which certificate it served, or how it refused;
	// kube-proxy may refuse a connection while its rules catch up.
	served := func(cfg *tls.Config) (*x509.Certificate, error) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
			if errors.Is(err, syscall.ECONNREFUSED) && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			if err != nil {
				return nil, err
			}
			defer func() { _ = c.Close() }()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
				return nil, err
			}
			return c.ConnectionState().PeerCertificates[0], nil
		}
	}
	if got, err := served(withCert); err != nil || !got.Equal(first.Cert) {
		t.Fatalf("a client with a certificate of ca.crt: %v, want the Secret's certificate served", err)
	}
	if _, err := served(trusting); err == nil {
		t.Error("a client without a certificate was let in: clientAuth is Require")
	}

	renewed := issuer.Server(t, host)
	if _, err := e.cs.CoreV1().Secrets(ns).Update(ctx, secret(renewed), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	took := e.untilServed(t, ns, "the renewed certificate", func() (bool, string) {
		got, err := served(withCert)
		return err == nil && got.Equal(renewed.Cert), fmt.Sprintf("served the first certificate: %v (error %v)", err == nil && got.Equal(first.Cert), err)
	})
	t.Logf("the renewed certificate served %.1fs after the Secret's update", took.Seconds())
	e.waitReady(t, ns, "secure", 3*time.Minute)

	// Partners' clients hold certificates of a CA of their own, in a trust
	// bundle's ConfigMap: spec.tls.clientCA takes the place of ca.crt.
	partners := tlstest.CA(t, "partners")
	bundle := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "partners"}, Data: map[string]string{"bundle.pem": string(partners.CertPEM)}}
	if _, err := e.cs.CoreV1().ConfigMaps(ns).Create(ctx, bundle, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.kubectl(t, e.ModelServerYAML(realenv.ModelServer{Name: "secure", URI: halfPlusTwo,
		SpecExtra: "  tls:\n    secretName: secure-grpc\n    clientAuth: Require\n    clientCA:\n      configMapName: partners\n      key: bundle.pem\n"}), "-n", ns, "apply", "-f", "-")
	// letIn waits until a client with a certificate of ca is served, and
	// says how long that took.
	letIn := func(what string, ca *tlstest.Cert) time.Duration {
		t.Helper()
		client := trusting.Clone()
		client.Certificates = []tls.Certificate{ca.Client(t, "partner-app").TLS()}
		return e.untilServed(t, ns, what, func() (bool, string) {
			_, err := served(client)
			return err == nil, fmt.Sprintf("refused: %v", err)
		})
	}
	took = letIn("a partner's client", partners)
	t.Logf("a partner's client served %.1fs after spec.tls.clientCA named its CA's bundle", took.Seconds())
	e.waitReady(t, ns, "secure", 3*time.Minute)
	// An old pod the Service still names for a second or two, while
	// kube-proxy catches up, would let it in.
	e.untilServed(t, ns, "the refusal of a client of the Secret's ca.crt", func() (bool, string) {
		_, err := served(withCert)
		return err != nil, "let in"
	})

	// trust-manager adds the partners' next CA beside the current one: the
	// operator watches the ConfigMaps, and the pods roll onto the bundle.
	next := tlstest.CA(t, "partners-next")
	bundle.Data["bundle.pem"] += string(next.CertPEM)
	if _, err := e.cs.CoreV1().ConfigMaps(ns).Update(ctx, bundle, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	took = letIn("a client of the partners' next CA", next)
	t.Logf("a client of the rotated bundle's next CA served %.1fs after the ConfigMap's update", took.Seconds())
}

// untilServed tries, every second for up to 3 minutes, until what is
// served as ok says, and says how long that took; past that, it fails
// with ok's last words and the namespace's pods.
func (e *env) untilServed(t *testing.T, ns, what string, ok func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		done, last := ok()
		if done {
			return time.Since(start)
		}
		if time.Since(start) > 3*time.Minute {
			t.Fatalf("%s not served within 3 minutes; last: %s\n%s", what, last, e.kubectlOut("-n", ns, "get", "pods", "-o", "wide"))
		}
		time.Sleep(time.Second)
	}
}
