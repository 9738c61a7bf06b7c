package realnode

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelserver-dev/modelserver-operator/internal/imagesig"
	"github.com/modelserver-dev/modelserver-operator/internal/imagesig/sigtest"
	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
	"github.com/modelserver-dev/modelserver-operator/internal/ociimage"
	"github.com/modelserver-dev/modelserver-operator/test/realenv"
)

// TestAModelImageIsPulledFromTheRegistryOverTLSAndServed: a model packed
// as KServe's modelcars pack it (an image whose /models is the model) is
// pushed to the cluster's registry; the fetch Job pulls it from the
// registry's TLS address, trusting the CA of the credentials Secret (a
// kubernetes.io/dockerconfigjson Secret, as for image pulls), and the
// server serves it. Without the CA, the fetch fails saying which key to
// set.
func TestAModelImageIsPulledFromTheRegistryOverTLSAndServed(t *testing.T) {
	t.Parallel()
	e := realNode(t)
	ns := e.namespace(t)
	ctx := context.Background()

	root, img := e.pushModelImage(t, "models/half-plus-two:123")
	uri := "oci://" + e.Cluster.RegistryTLS + "/models/half-plus-two:123"
	ca := e.caCert(t)
	// The registry asks for no credentials; the Secret's are those a
	// private one would check.
	auth := base64.StdEncoding.EncodeToString([]byte("puller:not-checked-here"))
	dockerConfig, _ := json.Marshal(map[string]any{"auths": map[string]any{e.Cluster.RegistryTLS: map[string]string{"auth": auth}}})
	_, err := e.cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "registry"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: dockerConfig, "ca.crt": ca},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-ca"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: dockerConfig},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	e.kubectl(t, e.ModelServerYAML(realenv.ModelServer{Name: "modelcar", URI: uri, Secret: "registry"}), "-n", ns, "apply", "-f", "-")
	e.kubectl(t, e.ModelServerYAML(realenv.ModelServer{Name: "untrusted", URI: uri, Secret: "no-ca"}), "-n", ns, "apply", "-f", "-")
	e.waitReady(t, ns, "modelcar", 3*time.Minute)
	t.Logf("kubectl apply to Ready, the model pulled from the registry: %.1fs", time.Since(start).Seconds())

	ms := e.get(t, ns, "modelcar")
	if m := ms.Status.Model; m == nil || !slices.Equal(m.Versions, []int64{123}) {
		t.Fatalf("status.model %+v: want versions [123]", m)
	} else if want, _ := modelFiles(root); m.SizeBytes != want || want == 0 {
		t.Errorf("status.model.sizeBytes %d, want %d (the SavedModel's bytes)", m.SizeBytes, want)
	} else if digest, _ := img.Digest(); m.ResolvedImage != e.Cluster.RegistryTLS+"/models/half-plus-two@"+digest.String() {
		t.Errorf("status.model.resolvedImage %q, want the image pulled, by its digest %s", m.ResolvedImage, digest)
	}
	if got := e.modelStatus(t, ns, "modelcar"); got["123"] != "AVAILABLE" || len(got) != 1 {
		t.Errorf("TF Serving (double) reports %v, want version 123 AVAILABLE", got)
	}
	// Its fetch pod's alone: the untrusted one's may not have started.
	logs := e.kubectl(t, "", "-n", ns, "logs", "-l", "job-name,app.kubernetes.io/instance=modelcar", "-c", "fetch", "--tail=-1", "--prefix")
	if !strings.Contains(logs, `"msg":"the tag names a manifest"`) || !strings.Contains(logs, "whose /models is the model") {
		t.Errorf("the fetch's log does not tell the digest and the image kind:\n%s", logs)
	}

	msg := e.waitFetchFailed(t, ns, "untrusted", "FetchFailed")
	if !strings.Contains(msg, "not trusted") || !strings.Contains(msg, "ca.crt") {
		t.Errorf("ModelFetched message %q: want it to say the certificate is not trusted and name ca.crt", msg)
	}
}

// TestAModelImageInAPrivateRepositoryIsPulledWithThePodsImagePullSecret:
// the registry asks for credentials to download the model image; the
// ModelServer's credentials Secret holds only the registry's CA, and the
// credentials come from the serving pods' image pull secret, as they
// would for the pods' own images. A pull secret that does not exist is
// skipped, as the kubelet skips it. Without the pull secret, the fetch
// fails saying where credentials are read.
func TestAModelImageInAPrivateRepositoryIsPulledWithThePodsImagePullSecret(t *testing.T) {
	t.Parallel()
	e := realNode(t)
	ns := e.namespace(t)
	ctx := context.Background()

	repo := localcluster.PrivateRepositories + "half-plus-two:123"
	// Weights of 40 MiB, which do not compress: the model's layer is
	// large enough to be downloaded in ranges.
	weights := make([]byte, 40<<20)
	_, _ = rand.NewChaCha8([32]byte{}).Read(weights)
	e.pushModelImage(t, repo, ociimage.File{Path: "/models/00000123/assets/weights.bin", Content: weights})
	uri := "oci://" + e.Cluster.RegistryTLS + "/" + repo
	auth := base64.StdEncoding.EncodeToString([]byte(e.Cluster.RegistryPrivateCredentials))
	dockerConfig, _ := json.Marshal(map[string]any{"auths": map[string]any{e.Cluster.RegistryTLS: map[string]string{"auth": auth}}})
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "registry-ca"}, Data: map[string][]byte{"ca.crt": e.caCert(t)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "regcred"}, Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: dockerConfig}},
	} {
		if _, err := e.cs.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	start := time.Now()
	e.kubectl(t, e.ModelServerYAML(realenv.ModelServer{Name: "private", URI: uri, Secret: "registry-ca",
		SpecExtra: "  podTemplate:\n    imagePullSecrets:\n    - name: not-there\n    - name: regcred\n"}), "-n", ns, "apply", "-f", "-")
	e.kubectl(t, e.ModelServerYAML(realenv.ModelServer{Name: "no-pull-secret", URI: uri, Secret: "registry-ca"}), "-n", ns, "apply", "-f", "-")
	// The pull secret given to the pods' service account instead, as the
	// pods get it: the fetch reads it too.
	puller := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "puller"}, ImagePullSecrets: []corev1.LocalObjectReference{{Name: "regcred"}}}
	if _, err := e.cs.CoreV1().ServiceAccounts(ns).Create(ctx, puller, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.kubectl(t, e.ModelServerYAML(realenv.ModelServer{Name: "account", URI: uri, Secret: "registry-ca",
		SpecExtra: "  podTemplate:\n    serviceAccountName: puller\n"}), "-n", ns, "apply", "-f", "-")
	e.waitReady(t, ns, "private", 3*time.Minute)
	e.waitReady(t, ns, "account", 3*time.Minute)
	t.Logf("kubectl apply to Ready, the model pulled with the pull secret's credentials: %.1fs", time.Since(start).Seconds())
	if got := e.modelStatus(t, ns, "private"); got["123"] != "AVAILABLE" {
		t.Errorf("TF Serving (double) reports %v, want version 123 AVAILABLE", got)
	}
	if ms := e.get(t, ns, "private"); ms.Status.Model == nil || ms.Status.Model.SizeBytes < int64(len(weights)) {
		t.Errorf("status.model %+v: want the 40 MiB of weights in its size", ms.Status.Model)
	}
	// Its fetch pod's alone: no-pull-secret's may not have started.
	logs := e.kubectl(t, "", "-n", ns, "logs", "-l", "job-name,app.kubernetes.io/instance=private", "-c", "fetch", "--tail=-1", "--prefix")
	if !strings.Contains(logs, `"msg":"downloading a layer in ranges"`) {
		t.Errorf("the fetch's log does not say the model's layer came in ranges:\n%s", logs)
	}

	msg := e.waitFetchFailed(t, ns, "no-pull-secret", "AccessDenied")
	for _, want := range []string{"no credentials for " + e.Cluster.RegistryTLS, "imagePullSecrets"} {
		if !strings.Contains(msg, want) {
			t.Errorf("ModelFetched message %q: want %q in it", msg, want)
		}
	}
}

// pushModelImage pushes the half_plus_two SavedModel as KServe's
// modelcars pack a model, an image whose /models is the model, to the
// cluster's registry as ref; it returns the model's directory and the
// image.
func (e *env) pushModelImage(t *testing.T, ref string, extra ...ociimage.File) (string, v1.Image) {
	t.Helper()
	root := filepath.Join(e.Root, "test/testdata/tf-serving/saved_model_half_plus_two_cpu")
	spec := ociimage.Spec{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		spec.Files = append(spec.Files, ociimage.File{Path: "/models/" + filepath.ToSlash(rel), HostPath: p})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	spec.Files = append(spec.Files, extra...)
	img, err := ociimage.BuildLocal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Cluster.PushImage(context.Background(), img, ref); err != nil {
		t.Fatal(err)
	}
	return root, img
}

// caCert is the PEM of the cluster's CA, which signed the registry's TLS
// certificate.
func (e *env) caCert(t *testing.T) []byte {
	t.Helper()
	ca, err := os.ReadFile(e.Cluster.CACertFile)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// TestASignedModelImageIsVerifiedBeforeItIsPulled: a model image signed
// with cosign's key, as cosign 3 attaches its signature, is verified with
// the spec's key by the fetch Job on the real node and served, the key
// named in the status; the same image required to carry another key's
// signature fails, nothing served.
func TestASignedModelImageIsVerifiedBeforeItIsPulled(t *testing.T) {
	t.Parallel()
	e := realNode(t)
	ns := e.namespace(t)
	ctx := context.Background()

	_, img := e.pushModelImage(t, "models/signed-half-plus-two:123")
	digest, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	ours, stranger := sigtest.NewKey(t), sigtest.NewKey(t)
	pushed, err := name.NewDigest(e.Cluster.Registry + "/models/signed-half-plus-two@" + digest.String())
	if err != nil {
		t.Fatal(err)
	}
	if err := ours.PushBundle(pushed); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "registry-ca"}, Data: map[string][]byte{"ca.crt": e.caCert(t)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	uri := "oci://" + e.Cluster.RegistryTLS + "/models/signed-half-plus-two:123"
	signature := func(key *sigtest.Key) string {
		return "    signature:\n      publicKeys:\n      - |\n" + indent(key.PublicPEM(), "        ")
	}
	start := time.Now()
	e.kubectl(t, e.ModelServerYAML(realenv.ModelServer{Name: "signed", URI: uri, Secret: "registry-ca", ModelExtra: signature(ours)}), "-n", ns, "apply", "-f", "-")
	e.kubectl(t, e.ModelServerYAML(realenv.ModelServer{Name: "strange", URI: uri, Secret: "registry-ca", ModelExtra: signature(stranger)}), "-n", ns, "apply", "-f", "-")
	e.waitReady(t, ns, "signed", 3*time.Minute)
	t.Logf("kubectl apply to Ready, the signature verified: %.1fs", time.Since(start).Seconds())
	want, err := imagesig.ParseKey(ours.PublicPEM())
	if err != nil {
		t.Fatal(err)
	}
	if m := e.get(t, ns, "signed").Status.Model; m == nil || m.SignedBy != want.ID {
		t.Errorf("status.model %+v: want signedBy %s", m, want.ID)
	}
	msg := e.waitFetchFailed(t, ns, "strange", "SignatureNotVerified")
	if !strings.Contains(msg, "not made by any of the keys") {
		t.Errorf("ModelFetched message %q: want it to say the signature is another key's", msg)
	}
}

func indent(text, prefix string) string {
	return prefix + strings.ReplaceAll(strings.TrimSuffix(text, "\n"), "\n", "\n"+prefix) + "\n"
}
