package fetchcmd

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/modelserver-dev/modelserver-operator/internal/servingtls"
)

// TLSConfig is the serving pods' tls-config init container's command,
// `tls-config --cert F --key F [--ca F --require-client-cert] --out F`: it
// writes the SSL config TF Serving reads with --ssl_config_file from the
// certificate and key of spec.tls's Secret, mounted in this container
// alone. TF Serving wants the PEM inside the config, not paths to it.
func TLSConfig(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("tls-config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cert := fs.String("cert", "", "The server's certificate chain, PEM.")
	key := fs.String("key", "", "The certificate's private key, PEM.")
	ca := fs.String("ca", "", "The CA certificates that sign the clients' certificates, PEM.")
	requireClient := fs.Bool("require-client-cert", false, "Ask every client for a certificate signed by --ca.")
	out := fs.String("out", "", "Where to write the SSL config.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cert == "" || *key == "" || *out == "" || fs.NArg() > 0 || *requireClient && *ca == "" {
		return errors.New("tls-config: want --cert, --key and --out (and --ca with --require-client-cert), and no other arguments")
	}
	var f servingtls.Files
	var err error
	if f.Cert, err = os.ReadFile(*cert); err != nil {
		return err
	}
	if f.Key, err = os.ReadFile(*key); err != nil {
		return err
	}
	if *requireClient {
		if f.CA, err = os.ReadFile(*ca); err != nil {
			return err
		}
	}
	if _, problem := servingtls.Check(f, *requireClient); problem != "" {
		return fmt.Errorf("spec.tls's Secret: %s", problem)
	}
	return writePrivate(*out, []byte(servingtls.SSLConfig(f, *requireClient)))
}

// writePrivate writes a file only its owner can read, whole or not at
// all: it holds the private key.
func writePrivate(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tls-config-*")
	if err != nil {
		return err
	}
	// Gone after the rename; left only by a failure, then removed.
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o400); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
