package values

import (
	"path"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/servingtls"
)

// servingTLS is the gRPC API's TLS, nil without spec.tls: TF Serving wants
// the PEM inside its SSL config rather than paths to it, so an init
// container of the operator's image writes the config from the Secret, and
// the private key stays out of the chart's values and the release record.
func servingTLS(t *servingv1alpha1.TLSSpec, in Inputs) *ServingTLS {
	if t == nil {
		return nil
	}
	args := []string{"tls-config",
		"--cert", path.Join(TLSSecretMountPath, servingtls.CertKey),
		"--key", path.Join(TLSSecretMountPath, servingtls.KeyKey),
	}
	if t.ClientAuth == servingv1alpha1.TLSClientAuthRequire {
		args = append(args, "--ca", path.Join(TLSSecretMountPath, servingtls.CAKey), "--require-client-cert")
	}
	args = append(args, "--out", SSLConfigPath)
	return &ServingTLS{SecretName: t.SecretName, Config: initContainer(in, liveInitContainer(in.LiveServingPod, TLSConfigContainerName), args)}
}
