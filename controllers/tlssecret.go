package controllers

import (
	"cmp"
	"context"
	"crypto/x509"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/names"
	"github.com/modelserver-dev/modelserver-operator/internal/servingtls"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// TLSSecretsCache is how the operator's cache holds Secrets: only the
// metadata of those of type kubernetes.io/tls, which is what spec.tls
// takes. A renewed certificate then wakes its ModelServers, while the keys
// stay out of the operator's memory and the Helm release records, Secrets
// too, out of its watch.
func TLSSecretsCache() cache.ByObject {
	return cache.ByObject{Field: fields.OneTermEqualSelector("type", string(corev1.SecretTypeTLS))}
}

// tlsSecretModelServers are the ModelServers whose spec.tls names the
// Secret o, as the server's or as its clients' CA. They are found by a
// walk of the namespace's ModelServers in the cache, uncopied: an index of
// ModelServers would make the operator need their CRD before it starts,
// and a TLS Secret's change is rare.
func (r *ModelServerReconciler) tlsSecretModelServers(ctx context.Context, o client.Object) []reconcile.Request {
	return r.modelServersIn(ctx, o.GetNamespace(), func(ms *servingv1alpha1.ModelServer) bool {
		t := ms.Spec.TLS
		return t != nil && (t.SecretName == o.GetName() || t.ClientCA != nil && t.ClientCA.SecretName == o.GetName())
	})
}

// modelServersIn are the ModelServers of namespace ns that match, found by
// a walk of the namespace's ModelServers in the cache, uncopied.
func (r *ModelServerReconciler) modelServersIn(ctx context.Context, ns string, match func(*servingv1alpha1.ModelServer) bool) []reconcile.Request {
	list := &servingv1alpha1.ModelServerList{}
	if err := r.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if match(&list.Items[i]) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: list.Items[i].Name}})
		}
	}
	return reqs
}

// eventTLSSecretUnusable is the reason of the Warning that says spec.tls's
// Secret went missing or bad under running pods, which keep serving: the
// ModelServer stays Ready, and has no other Event to show it by.
const eventTLSSecretUnusable = "TLSSecretUnusable"

// eventTLSCertificateExpired is the reason of the Warning that says the
// certificate of spec.tls's Secret has expired: the pods serve it, and
// every client that checks it refuses it, while the ModelServer is Ready.
const eventTLSCertificateExpired = "TLSCertificateExpired"

// eventTLSCertificateNotYetValid is the reason of the Warning that says
// the certificate of spec.tls's Secret is not valid yet: clients refuse it
// until then.
const eventTLSCertificateNotYetValid = "TLSCertificateNotYetValid"

// certClockSkew is how far in the future a certificate's start may be
// without a warning: issuers that do not backdate (cert-manager) start a
// certificate the second they sign it, and clocks differ by that much.
const certClockSkew = 5 * time.Minute

// tlsObservation is what spec.tls's Secret gave: the digest of its
// certificates, or why TF Serving could not serve it (reason, message).
// Where the pods running serve this Secret already, its problem is a
// warning and the digest theirs: they keep serving their certificate, and
// the rest of the spec is still rolled out. An expired certificate, or one
// not valid yet, is a warning too (warning, with the reason of its Event);
// the reconciler looks again when that changes (lookAgainIn).
type tlsObservation struct {
	digest, reason, message string
	warning, warningReason  string
	lookAgainIn             time.Duration
	// trust is how a Gateway can check the certificate, where the spec
	// routes gRPC through Gateways: the live BackendTLSPolicy's while the
	// pods serve a Secret that is now unusable.
	trust *values.GatewayTrust
}

// observeTLS reads spec.tls's Secret past the cache, which holds none of
// its data, and clientCA's ConfigMap or Secret where it names one. Only
// their certificates make the digest; the key is checked against them and
// goes nowhere.
func (r *ModelServerReconciler) observeTLS(ctx context.Context, ms *servingv1alpha1.ModelServer, d *appsv1.Deployment) (tlsObservation, error) {
	t := ms.Spec.TLS
	requireClient := t.ClientAuth == servingv1alpha1.TLSClientAuthRequire
	clientCA := values.ClientCAOf(t)
	field := "spec.tls.secretName"
	secret := &corev1.Secret{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ms.Namespace, Name: t.SecretName}, secret)
	var obs tlsObservation
	switch {
	case apierrors.IsNotFound(err):
		obs.reason, obs.message = servingv1alpha1.ReasonSecretNotFound, fmt.Sprintf("%s: Secret %q not found in namespace %s", field, t.SecretName, ms.Namespace)
	case err != nil:
		return obs, fmt.Errorf("read spec.tls's Secret: %w", err)
	case secret.Type != corev1.SecretTypeTLS:
		obs.reason, obs.message = servingv1alpha1.ReasonInvalidSecret, fmt.Sprintf("%s: Secret %q is of type %s, not %s (kubectl create secret tls, or a cert-manager Certificate, makes one)", field, t.SecretName, cmp.Or(secret.Type, corev1.SecretTypeOpaque), corev1.SecretTypeTLS)
	default:
		f := servingtls.Files{Cert: secret.Data[servingtls.CertKey], Key: secret.Data[servingtls.KeyKey], CA: secret.Data[servingtls.CAKey]}
		server, problem := servingtls.Check(f, requireClient && clientCA == nil)
		if problem != "" {
			obs.reason, obs.message = servingv1alpha1.ReasonInvalidSecret, fmt.Sprintf("%s: Secret %q: %s", field, t.SecretName, problem)
			break
		}
		if values.RoutesGRPC(ms.Spec.Gateway) {
			obs.trust = gatewayTrust(f, server, ms)
		}
		if clientCA != nil {
			ca, watched, err := r.readClientCA(ctx, ms.Namespace, clientCA)
			if err != nil {
				return obs, err
			}
			if !watched {
				// Nothing the operator watches tells of its change.
				obs.lookAgainIn = cmp.Or(r.RecheckAfter, time.Minute)
			}
			if ca.reason != "" {
				obs.reason, obs.message = ca.reason, ca.message
				break
			}
			f.CA = ca.pem
		}
		if requireClient {
			obs.digest = names.Hash(string(f.Cert), string(f.CA))
		} else {
			obs.digest = names.Hash(string(f.Cert))
		}
		now, notBefore, notAfter := r.clock().Now(), server.NotBefore, server.NotAfter
		switch {
		case notBefore.Sub(now) > certClockSkew:
			obs.warning = fmt.Sprintf("%s: Secret %q: its certificate is not valid before %s; TF Serving serves it, and clients refuse it until then (is a clock wrong, the issuer's or this cluster's?)", field, t.SecretName, notBefore.UTC().Format(time.RFC3339))
			obs.warningReason = eventTLSCertificateNotYetValid
			waitSooner(&obs.lookAgainIn, notBefore.Sub(now)+time.Second)
		case now.After(notAfter):
			obs.warning = fmt.Sprintf("%s: Secret %q: its certificate expired at %s; TF Serving serves it, and clients refuse it (is its issuer renewing it?)", field, t.SecretName, notAfter.UTC().Format(time.RFC3339))
			obs.warningReason = eventTLSCertificateExpired
		default:
			waitSooner(&obs.lookAgainIn, notAfter.Sub(now)+time.Second)
		}
		return obs, nil
	}
	if live := servedTLS(d, t.SecretName, requireClient, clientCA); live != "" {
		obs.digest, obs.warning = live, obs.message+": the pods running keep serving their certificate, but no new pod can start until it is mended"
		obs.warningReason = eventTLSSecretUnusable
		obs.reason, obs.message = "", ""
		if values.RoutesGRPC(ms.Spec.Gateway) {
			var err error
			if obs.trust, err = r.liveGatewayTrust(ctx, ms); err != nil {
				return obs, err
			}
		}
	}
	return obs, nil
}

// gatewayTrust is how a Gateway can check server, the certificate of
// spec.tls's Secret (f), reached through ms's Service: asked for by the
// Service's in-cluster name where the certificate is valid for one.
func gatewayTrust(f servingtls.Files, server *x509.Certificate, ms *servingv1alpha1.ModelServer) *values.GatewayTrust {
	svc := names.Service(ms.Name)
	inNamespace := svc + "." + ms.Namespace
	trust, problem := servingtls.TrustFor(f, server, []string{inNamespace + ".svc", inNamespace + ".svc.cluster.local", inNamespace, svc})
	if problem != "" {
		return &values.GatewayTrust{Problem: fmt.Sprintf("Secret %q: %s", ms.Spec.TLS.SecretName, problem)}
	}
	return &values.GatewayTrust{Hostname: trust.Hostname, CA: string(trust.CA)}
}

// liveGatewayTrust is what the release's BackendTLSPolicy tells Gateways
// now, nil without one: while spec.tls's Secret cannot be read, the pods
// serve the certificate they started with, and the Gateways keep checking
// it as they did.
func (r *ModelServerReconciler) liveGatewayTrust(ctx context.Context, ms *servingv1alpha1.ModelServer) (*values.GatewayTrust, error) {
	u, _, err := r.readOptional(ctx, values.BackendTLSPolicyKind, ms.Namespace, names.Deployment(ms.Name))
	if u == nil || err != nil {
		return nil, err
	}
	hostname, _, _ := unstructured.NestedString(u.Object, "spec", "validation", "hostname")
	if hostname == "" {
		return nil, nil
	}
	trust := &values.GatewayTrust{Hostname: hostname}
	refs, _, _ := unstructured.NestedSlice(u.Object, "spec", "validation", "caCertificateRefs")
	if len(refs) == 0 {
		return trust, nil
	}
	ref, _ := refs[0].(map[string]any)
	name, _ := ref["name"].(string)
	cm, err := getIfExists(ctx, r, ms.Namespace, name, &corev1.ConfigMap{})
	if cm == nil || err != nil {
		return nil, err
	}
	trust.CA = cm.Data[servingtls.CAKey]
	return trust, nil
}

// clientCA is what spec.tls.clientCA gave: its PEM, or why it cannot be
// the clients' CA (reason, message).
type clientCA struct {
	pem             []byte
	reason, message string
}

// readClientCA reads spec.tls.clientCA's ConfigMap or Secret past the
// cache. watched says a change of it, its making too, wakes the
// ModelServer: the objects of its kind are watched (watchingCASource),
// or it is a Secret of type kubernetes.io/tls, whose metadata the
// operator's cache holds.
func (r *ModelServerReconciler) readClientCA(ctx context.Context, ns string, c *values.ClientCA) (ca clientCA, watched bool, err error) {
	key := c.Key
	var (
		kind, name, notFound, invalid string
		data                          map[string][]byte
	)
	if c.ConfigMapName != "" {
		kind, name, notFound, invalid = "ConfigMap", c.ConfigMapName, servingv1alpha1.ReasonConfigMapNotFound, servingv1alpha1.ReasonInvalidConfigMap
		cm := &corev1.ConfigMap{}
		err = r.APIReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cm)
		watched = r.watchingCASource(ctx, configMapKind)
		data = make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
		maps.Copy(data, cm.BinaryData)
		for k, v := range cm.Data {
			data[k] = []byte(v)
		}
	} else {
		kind, name, notFound, invalid = "Secret", c.SecretName, servingv1alpha1.ReasonSecretNotFound, servingv1alpha1.ReasonInvalidSecret
		s := &corev1.Secret{}
		err = r.APIReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s)
		data, watched = s.Data, s.Type == corev1.SecretTypeTLS || r.watchingCASource(ctx, secretKind)
	}
	switch {
	case apierrors.IsNotFound(err):
		return clientCA{reason: notFound, message: fmt.Sprintf("spec.tls.clientCA: %s %q not found in namespace %s", kind, name, ns)}, watched, nil
	case err != nil:
		return clientCA{}, false, fmt.Errorf("read spec.tls.clientCA's %s: %w", kind, err)
	}
	pem, ok := data[key]
	switch {
	case !ok:
		return clientCA{reason: invalid, message: fmt.Sprintf("spec.tls.clientCA: %s %q has no key %s (its keys: %s)", kind, name, key, keyList(data))}, watched, nil
	case len(pem) == 0:
		return clientCA{reason: invalid, message: fmt.Sprintf("spec.tls.clientCA: %s %q: %s is empty", kind, name, key)}, watched, nil
	}
	if problem := servingtls.CheckCA(pem); problem != "" {
		return clientCA{reason: invalid, message: fmt.Sprintf("spec.tls.clientCA: %s %q: %s: %s", kind, name, key, problem)}, watched, nil
	}
	return clientCA{pem: pem}, watched, nil
}

// keyList names the keys of data, sorted, or says there are none.
func keyList(data map[string][]byte) string {
	if len(data) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(data)), ", ")
}

// servedTLS is the digest of the certificates the serving pods were made
// with, if they serve the Secret name and ask clients for certificates of
// clientCA, or of the Secret's ca.crt (clientCA nil, requireClient), or
// for none (clientCA nil, not requireClient); else "".
func servedTLS(d *appsv1.Deployment, name string, requireClient bool, clientCA *values.ClientCA) string {
	if d == nil {
		return ""
	}
	pod := d.Spec.Template
	mounted := slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Secret != nil && v.Secret.SecretName == name })
	init := slices.IndexFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == values.TLSConfigContainerName })
	if !mounted || init < 0 || slices.Contains(pod.Spec.InitContainers[init].Args, "--require-client-cert") != requireClient ||
		!ptr.Equal(servedClientCA(pod.Spec.Volumes), clientCA) {
		return ""
	}
	return pod.Annotations[values.AnnotationTLSCertDigest]
}

// servedClientCA is where the pods' volume of spec.tls.clientCA has them
// read the clients' CAs from; nil without one.
func servedClientCA(volumes []corev1.Volume) *values.ClientCA {
	i := slices.IndexFunc(volumes, func(v corev1.Volume) bool { return v.Name == values.TLSClientCAVolumeName })
	if i < 0 {
		return nil
	}
	switch v := volumes[i]; {
	case v.ConfigMap != nil && len(v.ConfigMap.Items) == 1:
		return &values.ClientCA{ConfigMapName: v.ConfigMap.Name, Key: v.ConfigMap.Items[0].Key}
	case v.Secret != nil && len(v.Secret.Items) == 1:
		return &values.ClientCA{SecretName: v.Secret.SecretName, Key: v.Secret.Items[0].Key}
	}
	return &values.ClientCA{} // of no shape the chart renders
}
