package fetchcmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelserver-dev/modelserver-operator/internal/servingtls"
	"github.com/modelserver-dev/modelserver-operator/internal/servingtls/tlstest"
)

func TestTLSConfigWritesTheSSLConfigForItsOwnerAlone(t *testing.T) {
	ca := tlstest.CA(t, "clients")
	server := tlstest.CA(t, "issuer").Server(t, "model.serving.svc")
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cert, key := server.WriteTo(t, dir)
	caFile := write("ca.crt", ca.CertPEM)
	out := filepath.Join(dir, "ssl.config")
	for _, requireClient := range []bool{false, true} {
		args := []string{"--cert", cert, "--key", key, "--ca", caFile, "--out", out}
		if requireClient {
			args = append(args, "--require-client-cert")
		}
		if err := TLSConfig(args, &bytes.Buffer{}); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if want := servingtls.SSLConfig(servingtls.Files{Cert: server.CertPEM, Key: server.KeyPEM, CA: ca.CertPEM}, requireClient); string(got) != want {
			t.Errorf("requireClient=%v: wrote\n%s\nwant\n%s", requireClient, got, want)
		}
		if fi, _ := os.Stat(out); fi.Mode().Perm() != 0o400 {
			t.Errorf("mode %v, want 0400: the file holds the private key", fi.Mode().Perm())
		}
		if err := os.Remove(out); err != nil {
			t.Fatal(err)
		}
	}

	other := tlstest.CA(t, "other")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a key of another certificate", []string{"--cert", cert, "--key", write("other.key", other.KeyPEM), "--out", out}, "spec.tls's Secret: tls.crt and tls.key: private key does not match public key"},
		{"client certificates without a CA", []string{"--cert", cert, "--key", key, "--out", out, "--require-client-cert"}, "want --cert, --key and --out (and --ca with --require-client-cert)"},
		{"an empty CA", []string{"--cert", cert, "--key", key, "--ca", write("empty", nil), "--out", out, "--require-client-cert"}, "ca.crt is missing or empty"},
		{"no out", []string{"--cert", cert, "--key", key}, "want --cert, --key and --out"},
		{"a missing file", []string{"--cert", filepath.Join(dir, "none"), "--key", key, "--out", out}, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := TLSConfig(tc.args, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("a refused config left %s behind (%v)", out, err)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, ".tls-config-*")); len(left) > 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}
