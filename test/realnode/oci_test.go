package realnode

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	img, err := ociimage.BuildLocal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Cluster.PushImage(ctx, img, "models/half-plus-two:123"); err != nil {
		t.Fatal(err)
	}
	uri := "oci://" + e.Cluster.RegistryTLS + "/models/half-plus-two:123"

	ca, err := os.ReadFile(e.Cluster.CACertFile)
	if err != nil {
		t.Fatal(err)
	}
	// The registry asks for no credentials; the Secret's are those a
	// private one would check.
	auth := base64.StdEncoding.EncodeToString([]byte("puller:not-checked-here"))
	dockerConfig, _ := json.Marshal(map[string]any{"auths": map[string]any{e.Cluster.RegistryTLS: map[string]string{"auth": auth}}})
	_, err = e.cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
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
	if got := e.modelStatus(t, ns, "modelcar", "half_plus_two"); got["123"] != "AVAILABLE" || len(got) != 1 {
		t.Errorf("TF Serving (double) reports %v, want version 123 AVAILABLE", got)
	}
	logs := e.kubectl(t, "", "-n", ns, "logs", "-l", "job-name", "-c", "fetch", "--tail=-1", "--prefix")
	if !strings.Contains(logs, `"msg":"the tag names a manifest"`) || !strings.Contains(logs, "whose /models is the model") {
		t.Errorf("the fetch's log does not tell the digest and the image kind:\n%s", logs)
	}

	msg := e.waitFetchFailed(t, ns, "untrusted", "FetchFailed")
	if !strings.Contains(msg, "not trusted") || !strings.Contains(msg, "ca.crt") {
		t.Errorf("ModelFetched message %q: want it to say the certificate is not trusted and name ca.crt", msg)
	}
}
