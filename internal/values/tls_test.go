package values

import (
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

func withTLS(clientAuth servingv1alpha1.TLSClientAuth) func(*servingv1alpha1.ModelServer) {
	return func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.TLS = &servingv1alpha1.TLSSpec{SecretName: "resnet-grpc", ClientAuth: clientAuth}
	}
}

// TestTLSRollsThePodsOnANewCertificate: spec.tls points TF Serving at the
// SSL config its init container writes; a new certificate, or clients
// asked for theirs, rolls the pods (the pod template changes), which read it only at start, and
// nothing of the key is in the values.
func TestTLSRollsThePodsOnANewCertificate(t *testing.T) {
	plain, err := For(modelServer(), fetched)
	if err != nil {
		t.Fatal(err)
	}
	in := fetched
	in.TLSCertDigest = "first"
	v, err := For(modelServer(withTLS("")), in)
	if err != nil {
		t.Fatal(err)
	}
	if plain.Serving.TLS != nil || slices.ContainsFunc(plain.Serving.Args, func(a string) bool { return a == "--ssl_config_file="+SSLConfigPath }) {
		t.Errorf("a ModelServer without spec.tls serves TLS: %+v %q", plain.Serving.TLS, plain.Serving.Args)
	}
	if v.Serving.TLS == nil || v.Serving.TLS.SecretName != "resnet-grpc" {
		t.Fatalf("serving TLS = %+v, want the Secret resnet-grpc", v.Serving.TLS)
	}
	// The server's own flags, spec.tls's among them, come before the
	// thread pools' sizes.
	sized := len(plain.Serving.Args) - len(threadFlags)
	if want := slices.Concat(plain.Serving.Args[:sized], []string{"--ssl_config_file=" + SSLConfigPath}, plain.Serving.Args[sized:]); !slices.Equal(v.Serving.Args, want) {
		t.Errorf("serving args\n got %q\nwant %q", v.Serving.Args, want)
	}
	wantArgs := []string{"tls-config", "--cert", "/etc/modelserver-tls/tls.crt", "--key", "/etc/modelserver-tls/tls.key", "--out", SSLConfigPath}
	if c := v.Serving.TLS.Config; c.Image != fetched.FetchImage || !slices.Equal(c.Args, wantArgs) {
		t.Errorf("tls-config runs %s %q, want %s %q", c.Image, c.Args, fetched.FetchImage, wantArgs)
	}

	renewed := in
	renewed.TLSCertDigest = "second"
	again, _ := For(modelServer(withTLS("")), in)
	after, _ := For(modelServer(withTLS("")), renewed)
	mutual, _ := For(modelServer(withTLS(servingv1alpha1.TLSClientAuthRequire)), in)
	digest := func(v *Values) string { return v.Serving.Annotations[AnnotationTLSCertDigest] }
	switch {
	case digest(v) != "first" || digest(again) != "first":
		t.Errorf("the pods carry the certificates' digest %q, then %q, want %q", digest(v), digest(again), "first")
	case digest(after) != "second":
		t.Errorf("a renewed certificate left the pods' digest at %q: TF Serving would keep the old one", digest(after))
	case plain.Serving.RestartChecksum == v.Serving.RestartChecksum:
		t.Error("turning TLS on left the restart checksum as it was")
	}
	if _, ok := plain.Serving.Annotations[AnnotationTLSCertDigest]; ok {
		t.Error("pods without spec.tls carry a certificate digest")
	}
	if args := mutual.Serving.TLS.Config.Args; !slices.Contains(args, "--require-client-cert") || !slices.Contains(args, "/etc/modelserver-tls/ca.crt") {
		t.Errorf("clientAuth Require: tls-config args %q, want ca.crt and --require-client-cert", args)
	}

	// The running init container keeps the image it was made with while
	// its arguments stay, so that upgrading the operator rolls no pod.
	upgraded := in
	upgraded.FetchImage = "example.com/op:2"
	upgraded.LiveServingPod = &corev1.PodSpec{InitContainers: []corev1.Container{
		{Name: TLSConfigContainerName, Image: "example.com/op:1", Command: v.Serving.TLS.Config.Command, Args: wantArgs},
	}}
	kept, _ := For(modelServer(withTLS("")), upgraded)
	if !reflect.DeepEqual(kept.Serving.TLS, v.Serving.TLS) {
		t.Errorf("after an operator upgrade tls-config is %+v, want it as it runs, %+v", kept.Serving.TLS, v.Serving.TLS)
	}
	upgradedMutual, _ := For(modelServer(withTLS(servingv1alpha1.TLSClientAuthRequire)), upgraded)
	if upgradedMutual.Serving.TLS.Config.Image != "example.com/op:2" {
		t.Errorf("new arguments run the old image %s, want the operator's own", upgradedMutual.Serving.TLS.Config.Image)
	}
}

// TestClientCAIsReadFromItsOwnSource: spec.tls.clientCA mounts its key as
// ca.crt in a volume of its own, which tls-config reads in place of the
// Secret's ca.crt; ca.crt is its key unless named.
func TestClientCAIsReadFromItsOwnSource(t *testing.T) {
	for _, tc := range []struct {
		name string
		ca   servingv1alpha1.TLSClientCA
		want ClientCA
	}{
		{"a trust bundle's ConfigMap", servingv1alpha1.TLSClientCA{ConfigMapName: "clients", Key: "bundle.pem"}, ClientCA{ConfigMapName: "clients", Key: "bundle.pem"}},
		{"a CA Issuer's Secret", servingv1alpha1.TLSClientCA{SecretName: "clients-ca"}, ClientCA{SecretName: "clients-ca", Key: "ca.crt"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := modelServer(withTLS(servingv1alpha1.TLSClientAuthRequire), func(ms *servingv1alpha1.ModelServer) { ms.Spec.TLS.ClientCA = &tc.ca })
			v, err := For(ms, fetched)
			if err != nil {
				t.Fatal(err)
			}
			if got := v.Serving.TLS.ClientCA; got == nil || *got != tc.want {
				t.Errorf("client CA %+v, want %+v", got, tc.want)
			}
			args := v.Serving.TLS.Config.Args
			if i := slices.Index(args, "--ca"); i < 0 || args[i+1] != TLSClientCAMountPath+"/ca.crt" || !slices.Contains(args, "--require-client-cert") {
				t.Errorf("tls-config args %q, want --ca %s/ca.crt and --require-client-cert", args, TLSClientCAMountPath)
			}
		})
	}
}
