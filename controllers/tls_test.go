package controllers_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/servingtls/tlstest"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// tlsSecret is a kubernetes.io/tls Secret of server, with ca as its
// ca.crt when not nil.
func tlsSecret(ns, name string, server, ca *tlstest.Cert) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: server.CertPEM, corev1.TLSPrivateKeyKey: server.KeyPEM},
	}
	if ca != nil {
		s.Data["ca.crt"] = ca.CertPEM
	}
	return s
}

// waitStatus waits until the ModelServer's status satisfies ok, and returns
// it.
func waitStatus(t *testing.T, ms *servingv1alpha1.ModelServer, what string, ok func(*servingv1alpha1.ModelServer) bool) *servingv1alpha1.ModelServer {
	t.Helper()
	got := &servingv1alpha1.ModelServer{}
	eventually(t, 60*time.Second, what, func(ctx context.Context) (bool, string) {
		if err := env.client.Get(ctx, client.ObjectKeyFromObject(ms), got); err != nil {
			return false, err.Error()
		}
		return ok(got), fmt.Sprintf("phase %s: %s; warnings %q", got.Status.Phase, got.Status.Message, got.Status.Warnings)
	})
	return got
}

// TestGRPCTLSFollowsItsSecret: a ModelServer whose spec.tls names a Secret
// that is missing, or that TF Serving could not serve, creates nothing and
// says why; each change of the Secret wakes it (the operator watches TLS
// Secrets' metadata), and once it is good the pods serve it through the
// tls-config init container. A renewed certificate rolls them; a Secret
// deleted under running pods is a warning, not an outage.
func TestGRPCTLSFollowsItsSecret(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	ms := newModelServer(ns, "secure", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.TLS = &servingv1alpha1.TLSSpec{SecretName: "secure-grpc", ClientAuth: servingv1alpha1.TLSClientAuthRequire}
	})
	if err := env.client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	blocked := func(reason, message string) {
		t.Helper()
		got := waitStatus(t, ms, reason+": "+message, func(got *servingv1alpha1.ModelServer) bool {
			c := meta.FindStatusCondition(got.Status.Conditions, servingv1alpha1.ConditionDeployed)
			return c != nil && c.Reason == reason && strings.Contains(c.Message, message)
		})
		if got.Status.Phase != servingv1alpha1.PhaseFailed {
			t.Errorf("phase %s, want Failed", got.Status.Phase)
		}
		if err := env.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ms.Name}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
			t.Errorf("a Deployment exists (%v) while spec.tls's Secret cannot be served", err)
		}
	}
	blocked(servingv1alpha1.ReasonSecretNotFound, `spec.tls.secretName: Secret "secure-grpc" not found in namespace `+ns)

	issuer, clients := tlstest.CA(t, "issuer"), tlstest.CA(t, "clients")
	first := issuer.Server(t, "secure."+ns+".svc")
	mismatched := tlsSecret(ns, "secure-grpc", first, clients)
	mismatched.Data[corev1.TLSPrivateKeyKey] = tlstest.CA(t, "other").KeyPEM
	if err := env.client.Create(ctx, mismatched); err != nil {
		t.Fatal(err)
	}
	blocked(servingv1alpha1.ReasonInvalidSecret, `spec.tls.secretName: Secret "secure-grpc": tls.crt and tls.key: private key does not match public key`)

	noCA := tlsSecret(ns, "secure-grpc", first, nil)
	if err := env.client.Update(ctx, noCA); err != nil {
		t.Fatal(err)
	}
	blocked(servingv1alpha1.ReasonInvalidSecret, "ca.crt is missing or empty: clientAuth Require needs the CA certificates")

	good := tlsSecret(ns, "secure-grpc", first, clients)
	if err := env.client.Update(ctx, good); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ms)
	d := get(t, ns, ms.Name, &appsv1.Deployment{})
	pod := d.Spec.Template.Spec
	if len(pod.InitContainers) == 0 || pod.InitContainers[0].Name != values.TLSConfigContainerName || !slices.Contains(pod.InitContainers[0].Args, "--require-client-cert") {
		t.Fatalf("init containers %+v, want tls-config first, asking for client certificates", pod.InitContainers)
	}
	if !slices.Contains(pod.Containers[0].Args, "--ssl_config_file="+values.SSLConfigPath) {
		t.Errorf("serving args %q lack the SSL config", pod.Containers[0].Args)
	}
	firstDigest := d.Spec.Template.Annotations[values.AnnotationTLSCertDigest]
	if firstDigest == "" {
		t.Fatal("the serving pods carry no certificate digest")
	}

	// cert-manager renews by updating the Secret in place.
	renewed := tlsSecret(ns, "secure-grpc", issuer.Server(t, "secure."+ns+".svc"), clients)
	if err := env.client.Update(ctx, renewed); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the pods rolled for the renewed certificate", func(ctx context.Context) (bool, string) {
		d := get(t, ns, ms.Name, &appsv1.Deployment{})
		got := d.Spec.Template.Annotations[values.AnnotationTLSCertDigest]
		return got != firstDigest && got != "", "digest " + got
	})
	waitReady(t, ms)
	renewedDigest := get(t, ns, ms.Name, &appsv1.Deployment{}).Spec.Template.Annotations[values.AnnotationTLSCertDigest]

	if err := env.client.Delete(ctx, renewed); err != nil {
		t.Fatal(err)
	}
	got := waitStatus(t, ms, "the deleted Secret warned of", func(got *servingv1alpha1.ModelServer) bool {
		return slices.ContainsFunc(got.Status.Warnings, func(w string) bool {
			return strings.Contains(w, `Secret "secure-grpc" not found`) && strings.Contains(w, "the pods running keep serving their certificate")
		})
	})
	if got.Status.Phase != servingv1alpha1.PhaseReady {
		t.Errorf("phase %s (%s) with the Secret gone: the pods still serve", got.Status.Phase, got.Status.Message)
	}
	if d := get(t, ns, ms.Name, &appsv1.Deployment{}); d.Spec.Template.Annotations[values.AnnotationTLSCertDigest] != renewedDigest {
		t.Error("the Secret's deletion changed the serving pods")
	}
	eventually(t, 30*time.Second, "a TLSSecretUnusable Warning", func(context.Context) (bool, string) {
		events := modelServerEvents(t, ns)
		return slices.ContainsFunc(events, func(e string) bool { return strings.HasPrefix(e, "Warning TLSSecretUnusable: ") }), strings.Join(events, "; ")
	})

	if err := env.client.Create(ctx, tlsSecret(ns, "secure-grpc", issuer.Server(t, "secure."+ns+".svc"), clients)); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, ms, "the warning gone with the Secret back", func(got *servingv1alpha1.ModelServer) bool {
		return len(got.Status.Warnings) == 0 && got.Status.Phase == servingv1alpha1.PhaseReady
	})
}

// TestClientCAsOfTheirOwnAreFollowed: a server certificate of a public CA
// carries no ca.crt of the clients'; spec.tls.clientCA names where their
// CAs are. A ConfigMap (a trust bundle) missing, without its key or with
// no certificate there creates nothing and says which; once good, the
// pods read it. The operator watches the ConfigMaps then (their metadata)
// and asks for no look again before the certificate's end: a rotated
// bundle rolls the pods at once, and one deleted under running pods is a
// warning. A kubernetes.io/tls Secret (a CA Issuer's) is
// watched: its change rolls them too; so is an Opaque one (trust-manager's).
func TestClientCAsOfTheirOwnAreFollowed(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	public, partners := tlstest.CA(t, "public"), tlstest.CA(t, "partners")
	if err := env.client.Create(ctx, tlsSecret(ns, "public-grpc", public.Server(t, "partner."+ns+".svc"), nil)); err != nil {
		t.Fatal(err)
	}
	ms := newModelServer(ns, "partner", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.TLS = &servingv1alpha1.TLSSpec{SecretName: "public-grpc", ClientAuth: servingv1alpha1.TLSClientAuthRequire,
			ClientCA: &servingv1alpha1.TLSClientCA{ConfigMapName: "partners", Key: "bundle.pem"}}
	})
	if err := env.client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	blocked := func(reason, message string) {
		t.Helper()
		waitStatus(t, ms, reason+": "+message, func(got *servingv1alpha1.ModelServer) bool {
			c := meta.FindStatusCondition(got.Status.Conditions, servingv1alpha1.ConditionDeployed)
			return c != nil && c.Reason == reason && strings.HasPrefix(c.Message, message) && got.Status.Phase == servingv1alpha1.PhaseFailed
		})
		if err := env.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ms.Name}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
			t.Errorf("a Deployment exists (%v) while spec.tls.clientCA cannot be read", err)
		}
	}
	blocked(servingv1alpha1.ReasonConfigMapNotFound, `spec.tls.clientCA: ConfigMap "partners" not found in namespace `+ns)

	bundle := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "partners"}, Data: map[string]string{"ca.crt": string(partners.CertPEM)}}
	if err := env.client.Create(ctx, bundle); err != nil {
		t.Fatal(err)
	}
	blocked(servingv1alpha1.ReasonInvalidConfigMap, `spec.tls.clientCA: ConfigMap "partners" has no key bundle.pem (its keys: ca.crt)`)
	bundle.Data = map[string]string{"bundle.pem": string(partners.KeyPEM)}
	if err := env.client.Update(ctx, bundle); err != nil {
		t.Fatal(err)
	}
	blocked(servingv1alpha1.ReasonInvalidConfigMap, `spec.tls.clientCA: ConfigMap "partners": bundle.pem: block 1 is a `)

	bundle.Data = map[string]string{"bundle.pem": string(partners.CertPEM)}
	if err := env.client.Update(ctx, bundle); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ms)
	noLookAgain := func(what string) {
		t.Helper()
		// The manager reconciles the ModelServer beside this call: a
		// status write of one can conflict with the other's.
		eventually(t, 15*time.Second, what+": no look again before the certificate's end", func(ctx context.Context) (bool, string) {
			result, err := env.reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ms)})
			return err == nil && result.RequeueAfter > time.Hour, fmt.Sprintf("look again in %v (%v)", result.RequeueAfter, err)
		})
	}
	noLookAgain("the ConfigMap watched")
	d := get(t, ns, ms.Name, &appsv1.Deployment{})
	firstDigest := d.Spec.Template.Annotations[values.AnnotationTLSCertDigest]
	if i := slices.IndexFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == values.TLSClientCAVolumeName }); i < 0 ||
		d.Spec.Template.Spec.Volumes[i].ConfigMap == nil || d.Spec.Template.Spec.Volumes[i].ConfigMap.Name != "partners" {
		t.Fatalf("volumes %+v, want the ConfigMap partners's", d.Spec.Template.Spec.Volumes)
	}

	// trust-manager adds the next CA beside the current one.
	bundle.Data = map[string]string{"bundle.pem": string(partners.CertPEM) + string(tlstest.CA(t, "partners-next").CertPEM)}
	if err := env.client.Update(ctx, bundle); err != nil {
		t.Fatal(err)
	}
	rolledFrom := func(what, from string) string {
		t.Helper()
		var now string
		eventually(t, 60*time.Second, what, func(ctx context.Context) (bool, string) {
			now = get(t, ns, ms.Name, &appsv1.Deployment{}).Spec.Template.Annotations[values.AnnotationTLSCertDigest]
			return now != from && now != "", "digest " + now
		})
		waitReady(t, ms)
		return now
	}
	rotated := rolledFrom("the pods rolled for the rotated bundle", firstDigest)

	if err := env.client.Delete(ctx, bundle); err != nil {
		t.Fatal(err)
	}
	got := waitStatus(t, ms, "the deleted bundle warned of", func(got *servingv1alpha1.ModelServer) bool {
		return slices.ContainsFunc(got.Status.Warnings, func(w string) bool {
			return strings.Contains(w, `spec.tls.clientCA: ConfigMap "partners" not found`) && strings.Contains(w, "the pods running keep serving")
		})
	})
	if got.Status.Phase != servingv1alpha1.PhaseReady {
		t.Errorf("phase %s (%s) with the bundle gone: the pods still serve", got.Status.Phase, got.Status.Message)
	}
	if now := get(t, ns, ms.Name, &appsv1.Deployment{}).Spec.Template.Annotations[values.AnnotationTLSCertDigest]; now != rotated {
		t.Error("the bundle's deletion changed the serving pods")
	}

	// A CA Issuer's Secret, of type kubernetes.io/tls, at its ca.crt.
	issuerCA := tlstest.CA(t, "issuer")
	caSecret := tlsSecret(ns, "issuer-ca", issuerCA, issuerCA)
	if err := env.client.Create(ctx, caSecret); err != nil {
		t.Fatal(err)
	}
	if err := env.client.Get(ctx, client.ObjectKeyFromObject(ms), ms); err != nil {
		t.Fatal(err)
	}
	ms.Spec.TLS.ClientCA = &servingv1alpha1.TLSClientCA{SecretName: "issuer-ca"}
	if err := env.client.Update(ctx, ms); err != nil {
		t.Fatal(err)
	}
	fromSecret := rolledFrom("the pods rolled onto the Secret's CA", rotated)
	waitStatus(t, ms, "the warning gone with the bundle no longer named", func(got *servingv1alpha1.ModelServer) bool {
		return len(got.Status.Warnings) == 0 && got.Status.Phase == servingv1alpha1.PhaseReady
	})
	renewed := tlstest.CA(t, "issuer-renewed")
	if err := env.client.Update(ctx, tlsSecret(ns, "issuer-ca", renewed, renewed)); err != nil {
		t.Fatal(err)
	}
	fromRenewed := rolledFrom("the pods rolled for the renewed CA Issuer's Secret", fromSecret)

	// trust-manager's bundle as an Opaque Secret: watched too, once named.
	trust := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "partners-trust"},
		Data: map[string][]byte{"trust-bundle.pem": partners.CertPEM}}
	if err := env.client.Create(ctx, trust); err != nil {
		t.Fatal(err)
	}
	if err := env.client.Get(ctx, client.ObjectKeyFromObject(ms), ms); err != nil {
		t.Fatal(err)
	}
	ms.Spec.TLS.ClientCA = &servingv1alpha1.TLSClientCA{SecretName: "partners-trust", Key: "trust-bundle.pem"}
	if err := env.client.Update(ctx, ms); err != nil {
		t.Fatal(err)
	}
	rolledFrom("the pods rolled onto the Opaque Secret's bundle", fromRenewed)
	noLookAgain("the Opaque Secret watched")
}

// TestATLSSecretOfAnotherTypeIsNamed: spec.tls takes a kubernetes.io/tls
// Secret; an Opaque one with the same keys is refused by its type, and
// looked at again after a while, since only TLS Secrets are watched.
func TestATLSSecretOfAnotherTypeIsNamed(t *testing.T) {
	ctx := context.Background()
	r := newProcessReconciler(t, nil)
	ms := createUnmanaged(t, "opaque-tls", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.TLS = &servingv1alpha1.TLSSpec{SecretName: "opaque-tls"}
	})
	opaque := tlsSecret(ms.Namespace, "opaque-tls", tlstest.CA(t, "issuer").Server(t, "opaque"), nil)
	opaque.Type = corev1.SecretTypeOpaque
	if err := env.client.Create(ctx, opaque); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.client.Delete(context.Background(), opaque) })
	result, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ms)})
	if err != nil {
		t.Fatal(err)
	}
	got := get(t, ms.Namespace, ms.Name, &servingv1alpha1.ModelServer{})
	c := meta.FindStatusCondition(got.Status.Conditions, servingv1alpha1.ConditionDeployed)
	const want = `spec.tls.secretName: Secret "opaque-tls" is of type Opaque, not kubernetes.io/tls (kubectl create secret tls, or a cert-manager Certificate, makes one)`
	if c == nil || c.Reason != servingv1alpha1.ReasonInvalidSecret || c.Message != want {
		t.Errorf("Deployed %+v, want InvalidSecret: %s", c, want)
	}
	if result.RequeueAfter <= 0 {
		t.Error("no look again: nothing watched tells of a Secret of another type")
	}
}

// TestAnExpiredCertificateIsWarnedOf: the pods serve the certificate they
// read, expired or not, and clients refuse an expired one while the
// ModelServer is Ready: the status says so from the moment it expires,
// when the reconciler looks again, with one Warning Event; a renewed
// certificate takes the warning away.
func TestAnExpiredCertificateIsWarnedOf(t *testing.T) {
	ctx := context.Background()
	_, r, rec := recordingReconciler(t)
	ms := createUnmanaged(t, "expiring", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.TLS = &servingv1alpha1.TLSSpec{SecretName: "expiring-grpc"}
	})
	issuer := tlstest.CA(t, "issuer")
	server := issuer.Server(t, "expiring")
	secret := tlsSecret(ms.Namespace, "expiring-grpc", server, nil)
	if err := env.client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.client.Delete(context.Background(), secret) })
	c := newClockedReconciler(t, r, ms)
	c.reconcileUntilReady()
	notAfter := server.Cert.NotAfter
	now := time.Now()
	if result := c.reconcile(now); !about(result.RequeueAfter, notAfter.Sub(now)) {
		t.Errorf("look again in %v, want when the certificate expires, in %v", result.RequeueAfter, notAfter.Sub(now))
	}
	if w := c.get().Status.Warnings; len(w) != 0 {
		t.Errorf("warnings %q before the certificate expires", w)
	}

	c.reconcile(notAfter.Add(time.Second))
	c.reconcile(notAfter.Add(time.Minute))
	got := c.get()
	want := `spec.tls.secretName: Secret "expiring-grpc": its certificate expired at ` + notAfter.UTC().Format(time.RFC3339) + "; TF Serving serves it, and clients refuse it"
	if len(got.Status.Warnings) != 1 || !strings.HasPrefix(got.Status.Warnings[0], want) {
		t.Errorf("warnings %q, want one: %s…", got.Status.Warnings, want)
	}
	if got.Status.Phase != servingv1alpha1.PhaseReady {
		t.Errorf("phase %s: the pods serve", got.Status.Phase)
	}
	if n := rec.count("TLSCertificateExpired"); n != 1 {
		t.Errorf("%d TLSCertificateExpired Events, want 1; all:\n%s", n, rec)
	}

	renewed := tlsSecret(ms.Namespace, "expiring-grpc", issuer.Server(t, "expiring"), nil)
	if err := env.client.Update(ctx, renewed); err != nil {
		t.Fatal(err)
	}
	c.reconcile(time.Now())
	if w := c.get().Status.Warnings; len(w) != 0 {
		t.Errorf("warnings %q after the renewal", w)
	}
}

// TestACertificateNotValidYetIsWarnedOfUntilItIs: a certificate whose
// start is ahead of the clock (an issuer's clock, or the cluster's, off)
// is served, and refused by clients until it starts: the status says so,
// with one Warning Event, and the reconciler looks again when it starts.
func TestACertificateNotValidYetIsWarnedOfUntilItIs(t *testing.T) {
	ctx := context.Background()
	_, r, rec := recordingReconciler(t)
	ms := createUnmanaged(t, "early", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.TLS = &servingv1alpha1.TLSSpec{SecretName: "early-grpc"}
	})
	server := tlstest.CA(t, "issuer").Server(t, "early")
	secret := tlsSecret(ms.Namespace, "early-grpc", server, nil)
	if err := env.client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.client.Delete(context.Background(), secret) })
	c := newClockedReconciler(t, r, ms)
	c.reconcileUntilReady()
	notBefore := server.Cert.NotBefore

	// Within the clock skew allowed: nothing to say.
	if c.reconcile(notBefore.Add(-time.Minute)); len(c.get().Status.Warnings) != 0 {
		t.Errorf("warnings %q a minute before the certificate starts", c.get().Status.Warnings)
	}
	early := notBefore.Add(-time.Hour)
	result := c.reconcile(early)
	c.reconcile(early.Add(time.Second))
	want := `spec.tls.secretName: Secret "early-grpc": its certificate is not valid before ` + notBefore.UTC().Format(time.RFC3339) + "; TF Serving serves it, and clients refuse it until then"
	if w := c.get().Status.Warnings; len(w) != 1 || !strings.HasPrefix(w[0], want) {
		t.Errorf("warnings %q, want one: %s…", w, want)
	}
	if !about(result.RequeueAfter, time.Hour) {
		t.Errorf("look again in %v, want when the certificate starts, in an hour", result.RequeueAfter)
	}
	if n := rec.count("TLSCertificateNotYetValid"); n != 1 {
		t.Errorf("%d TLSCertificateNotYetValid Events, want 1; all:\n%s", n, rec)
	}
	if c.reconcile(time.Now()); len(c.get().Status.Warnings) != 0 {
		t.Errorf("warnings %q once the certificate is valid", c.get().Status.Warnings)
	}
}

// TestGRPCOverTLSThroughAGatewayComesWithABackendTLSPolicy: where the gRPC
// port serves TLS and a GRPCRoute sends a Gateway's gRPC to it, the
// release has a BackendTLSPolicy that tells the Gateway to speak TLS, by
// the Service's name the certificate is valid for, checked against the
// issuer's CA from ca.crt; the gRPC URL is listed once the Gateway
// accepted the policy, and its refusal is warned of. Where the API is
// missing, that is said; a Secret gone under running pods leaves the
// policy as it is.
func TestGRPCOverTLSThroughAGatewayComesWithABackendTLSPolicy(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	installGatewayAPI(t, gatewayCRDs("HTTPRoute", "GRPCRoute", "Gateway")...)
	object := func(kind, name string) *unstructured.Unstructured { return gatewayAPIObject(ns, kind, name) }
	makeGateway(t, ns, "gw", "198.18.0.32", map[string]any{"name": "web", "protocol": "HTTP", "port": int64(80)})
	issuer := tlstest.CA(t, "issuer")
	secret := tlsSecret(ns, "tlsgw-grpc", issuer.Server(t, "tlsgw."+ns+".svc.cluster.local", "tlsgw."+ns+".svc"), issuer)
	if err := env.client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	ms := newModelServer(ns, "tlsgw", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.TLS = &servingv1alpha1.TLSSpec{SecretName: "tlsgw-grpc"}
		ms.Spec.Gateway = &servingv1alpha1.GatewaySpec{ParentRefs: []servingv1alpha1.GatewayParentRef{{Name: "gw"}}}
	})
	if err := env.client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	warned := func(part string) func(*servingv1alpha1.ModelServer) bool {
		return func(got *servingv1alpha1.ModelServer) bool {
			return slices.ContainsFunc(got.Status.Warnings, func(w string) bool { return strings.Contains(w, part) })
		}
	}
	waitStatus(t, ms, "the missing BackendTLSPolicy API said", warned("no gateway.networking.k8s.io/v1/BackendTLSPolicy API"))

	installGatewayAPI(t, gatewayCRDs("BackendTLSPolicy")...)
	policy := object("BackendTLSPolicy", "tlsgw")
	eventually(t, 60*time.Second, "the BackendTLSPolicy rendered", func(ctx context.Context) (bool, string) {
		err := env.client.Get(ctx, client.ObjectKeyFromObject(policy), policy)
		return err == nil, fmt.Sprint(err)
	})
	validation, _, _ := unstructured.NestedMap(policy.Object, "spec", "validation")
	targets, _, _ := unstructured.NestedSlice(policy.Object, "spec", "targetRefs")
	wantTarget := map[string]any{"group": "", "kind": "Service", "name": "tlsgw", "sectionName": "grpc"}
	if len(targets) != 1 || fmt.Sprint(targets[0]) != fmt.Sprint(wantTarget) {
		t.Errorf("targetRefs = %v, want the Service's gRPC port", targets)
	}
	refs, _ := validation["caCertificateRefs"].([]any)
	if validation["hostname"] != "tlsgw."+ns+".svc" || len(refs) != 1 || refs[0].(map[string]any)["name"] != "tlsgw-backend-tls-ca" {
		t.Fatalf("validation = %v, want the Service's name and the CA's ConfigMap", validation)
	}
	ca := get(t, ns, "tlsgw-backend-tls-ca", &corev1.ConfigMap{})
	if ca.Data["ca.crt"] != string(issuer.CertPEM) {
		t.Errorf("the CA's ConfigMap holds %q, want ca.crt", ca.Data)
	}
	waitStatus(t, ms, "no warning once the policy is rendered", func(got *servingv1alpha1.ModelServer) bool { return len(got.Status.Warnings) == 0 })

	// The Gateway accepts both routes: the REST API is listed, gRPC waits
	// for the policy's verdict.
	setStatus := func(u *unstructured.Unstructured, field, refKey string, ref map[string]any, conds ...metav1.Condition) {
		t.Helper()
		setGatewayStatus(t, u, map[string]any{field: []any{map[string]any{refKey: ref, "controllerName": "example.test/gateway", "conditions": conditionsJSON(t, conds)}}})
	}
	accepted := metav1.Condition{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted"}
	for _, kind := range []string{"HTTPRoute", "GRPCRoute"} {
		setStatus(object(kind, "tlsgw"), "parents", "parentRef", map[string]any{"name": "gw"}, accepted)
	}
	rest := servingv1alpha1.ExternalEndpoint{Via: "Gateway " + ns + "/gw", REST: "http://198.18.0.32/v1/models/tlsgw"}
	external := func(want servingv1alpha1.ExternalEndpoint) func(*servingv1alpha1.ModelServer) bool {
		return func(got *servingv1alpha1.ModelServer) bool {
			return got.Status.Endpoints != nil && slices.Equal(got.Status.Endpoints.External, []servingv1alpha1.ExternalEndpoint{want})
		}
	}
	waitStatus(t, ms, "the REST API listed alone", external(rest))

	gateway := map[string]any{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"}
	setStatus(policy, "ancestors", "ancestorRef", gateway,
		metav1.Condition{Type: "Accepted", Status: metav1.ConditionFalse, Reason: "NoValidCACertificate", Message: "the CA certificate does not parse"})
	waitStatus(t, ms, "the refused policy warned of",
		warned("BackendTLSPolicy tlsgw: Gateway "+ns+"/gw did not accept it (NoValidCACertificate): the CA certificate does not parse"))
	setStatus(policy, "ancestors", "ancestorRef", gateway, accepted)
	both := rest
	both.GRPC = "198.18.0.32:80"
	got := waitStatus(t, ms, "gRPC listed once the policy is accepted", external(both))
	if len(got.Status.Warnings) != 0 {
		t.Errorf("warnings %q", got.Status.Warnings)
	}

	// The Secret goes: the pods keep serving their certificate, and the
	// Gateways keep checking it as they did.
	revision := got.Status.Release.Revision
	if err := env.client.Delete(ctx, secret); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, ms, "the missing Secret warned of", warned(`Secret "tlsgw-grpc" not found`))
	if err := env.client.Get(ctx, client.ObjectKeyFromObject(policy), policy); err != nil {
		t.Fatalf("the policy is gone with the Secret: %v", err)
	}
	if h, _, _ := unstructured.NestedString(policy.Object, "spec", "validation", "hostname"); h != "tlsgw."+ns+".svc" {
		t.Errorf("the policy's hostname is now %q", h)
	}
	if ca := get(t, ns, "tlsgw-backend-tls-ca", &corev1.ConfigMap{}); ca.Data["ca.crt"] != string(issuer.CertPEM) {
		t.Errorf("the CA's ConfigMap holds %q", ca.Data)
	}
	if got := get(t, ns, "tlsgw", &servingv1alpha1.ModelServer{}); got.Status.Release.Revision != revision {
		t.Errorf("release revision %d, was %d: nothing the release renders changed", got.Status.Release.Revision, revision)
	}
}

// gatewayAPIObject is an object of the Gateway API's kind, to get or make.
func gatewayAPIObject(ns, kind, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("gateway.networking.k8s.io/v1")
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// setGatewayStatus writes u's status as its Gateway would.
func setGatewayStatus(t *testing.T, u *unstructured.Unstructured, status map[string]any) {
	t.Helper()
	ctx := context.Background()
	if err := env.client.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
		t.Fatal(err)
	}
	u.Object["status"] = status
	if err := env.client.Update(ctx, u); err != nil {
		t.Fatal(err)
	}
}

// conditionsJSON are conds as an unstructured object holds them.
func conditionsJSON(t *testing.T, conds []metav1.Condition) []any {
	t.Helper()
	var list []any
	for _, c := range conds {
		c.LastTransitionTime = metav1.Now()
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&c)
		if err != nil {
			t.Fatal(err)
		}
		list = append(list, m)
	}
	return list
}
