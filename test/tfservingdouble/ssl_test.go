package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelserver-dev/modelserver-operator/internal/fetchcmd"
	"github.com/modelserver-dev/modelserver-operator/internal/servingtls/tlstest"
)

// sslConfig writes the SSL config as the serving pods' tls-config init
// container writes it.
func sslConfig(t *testing.T, server, clients *tlstest.Cert) string {
	t.Helper()
	dir := t.TempDir()
	cert, key := server.WriteTo(t, dir)
	out := filepath.Join(dir, "ssl.config")
	args := []string{"--cert", cert, "--key", key, "--out", out}
	if clients != nil {
		ca, _ := clients.WriteTo(t, t.TempDir())
		args = append(args, "--ca", ca, "--require-client-cert")
	}
	if err := fetchcmd.TLSConfig(args, io.Discard); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTheOperatorsSSLConfigServesGRPCOverTLS: the gRPC port serves the
// certificate of the SSL config the operator's init container writes, and
// with client_verify refuses a client without a certificate of the CA.
func TestTheOperatorsSSLConfigServesGRPCOverTLS(t *testing.T) {
	issuer, clients := tlstest.CA(t, "issuer"), tlstest.CA(t, "clients")
	server := issuer.Server(t, "127.0.0.1")
	base := t.TempDir()
	addVersion(t, base, "1")
	grpcPort := freePort(t)
	startDouble(t, context.Background(), freePort(t), fmt.Sprintf("--port=%d", grpcPort), "--model_name=m", "--model_base_path="+base,
		"--ssl_config_file="+sslConfig(t, server, clients))
	addr := fmt.Sprintf("127.0.0.1:%d", grpcPort)

	// call dials as a client would, and says how the server took it.
	call := func(cfg *tls.Config) error {
		c, err := tls.Dial("tcp", addr, cfg)
		if err != nil {
			return err
		}
		defer func() { _ = c.Close() }()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if got := c.ConnectionState().PeerCertificates[0]; !got.Equal(server.Cert) {
			return fmt.Errorf("served %s, want %s", got.Subject, server.Cert.Subject)
		}
		// The double closes after the handshake; a refused client
		// certificate comes as an alert on the first read (TLS 1.3).
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			return err
		}
		return nil
	}
	trusting := &tls.Config{RootCAs: issuer.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	eventually(t, "the gRPC port open", 10*time.Second, func() bool {
		_, err := tls.Dial("tcp", addr, trusting)
		return err == nil || !strings.Contains(err.Error(), "connection refused")
	})
	withCert := trusting.Clone()
	withCert.Certificates = []tls.Certificate{clients.Client(t, "app").TLS()}
	if err := call(withCert); err != nil {
		t.Errorf("a client with a certificate of the clients' CA: %v", err)
	}
	if err := call(trusting); err == nil || !strings.Contains(err.Error(), "certificate required") {
		t.Errorf("a client without a certificate: %v, want it refused (certificate required)", err)
	}
	stranger := trusting.Clone()
	stranger.Certificates = []tls.Certificate{issuer.Client(t, "stranger").TLS()}
	if err := call(stranger); err == nil {
		t.Error("a client with a certificate of another CA was let in")
	}
	if err := call(&tls.Config{RootCAs: clients.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}); err == nil {
		t.Error("a client that does not trust the issuer completed the handshake")
	}
}

// TestAnSSLConfigTheServerCannotUseFailsTheStart: a key that is not the
// certificate's fails the start, once the models are loaded, as gRPC does.
func TestAnSSLConfigTheServerCannotUseFailsTheStart(t *testing.T) {
	server := tlstest.CA(t, "issuer").Server(t, "127.0.0.1")
	path := filepath.Join(t.TempDir(), "ssl.config")
	writeFile(t, path, fmt.Sprintf("server_key: %q\nserver_cert: %q\n", tlstest.CA(t, "other").KeyPEM, server.CertPEM))
	base := t.TempDir()
	addVersion(t, base, "1")
	r := startDouble(t, context.Background(), freePort(t), fmt.Sprintf("--port=%d", freePort(t)), "--model_name=m", "--model_base_path="+base, "--ssl_config_file="+path)
	select {
	case code := <-r.done:
		r.done <- code
		if code != 255 || !strings.Contains(r.stdout.String(), "Failed to BuildAndStart gRPC server") {
			t.Errorf("exit %d, stdout %q; want 255 and the start's failure", code, r.stdout)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the double started with a key that is not its certificate's")
	}
}
