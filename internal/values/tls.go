package values

import (
	"cmp"
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
	clientCA := ClientCAOf(t)
	if t.ClientAuth == servingv1alpha1.TLSClientAuthRequire {
		ca := path.Join(TLSSecretMountPath, servingtls.CAKey)
		if clientCA != nil {
			ca = path.Join(TLSClientCAMountPath, servingtls.CAKey)
		}
		args = append(args, "--ca", ca, "--require-client-cert")
	}
	args = append(args, "--out", SSLConfigPath)
	return &ServingTLS{SecretName: t.SecretName, ClientCA: clientCA, Config: initContainer(in, liveInitContainer(in.LiveServingPod, TLSConfigContainerName), args)}
}

// ClientCAOf is where spec.tls t has the pods read the clients' CAs from
// in place of its Secret's ca.crt, its key defaulted; nil where that is
// the Secret's ca.crt, or clients are not asked for certificates.
func ClientCAOf(t *servingv1alpha1.TLSSpec) *ClientCA {
	if t == nil || t.ClientAuth != servingv1alpha1.TLSClientAuthRequire || t.ClientCA == nil {
		return nil
	}
	c := t.ClientCA
	return &ClientCA{ConfigMapName: c.ConfigMapName, SecretName: c.SecretName, Key: cmp.Or(c.Key, servingtls.CAKey)}
}
