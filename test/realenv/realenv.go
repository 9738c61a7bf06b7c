// Package realenv brings up what running the operator as users run it
// needs, on a real node: the local cluster with its real node and registry,
// the operator's image built from this tree (under the name
// dist/install.yaml uses), the TF Serving test double's image, and a real
// S3 server (versitygw) on the host's bridge address with the test models
// loaded. The real-node end-to-end tests, `make cluster-up REAL_NODE=1`
// and `make demo` share it.
package realenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
	"github.com/modelserver-dev/modelserver-operator/internal/ociimage"
	"github.com/modelserver-dev/modelserver-operator/test/s3server"
)

// The S3 bucket and the objects loaded into it.
const (
	Bucket           = "models"
	HalfPlusTwo      = "s3://models/half_plus_two"
	TwoVersions      = "s3://models/half_plus_two_2_versions"
	HalfPlusThree    = "s3://models/half_plus_three"
	CorruptedArchive = "s3://models/broken/half_plus_two.tar.gz"
	// BigModel is a real SavedModel with a large asset beside it, whose
	// download takes long enough to be interrupted.
	BigModel = "s3://models/big"
	// Written to a tmpfs volume, the asset counts against the fetch pod's
	// memory limit (512Mi): kept well below it.
	BigAssetBytes = 200 << 20
	// OperatorNamespace is where dist/install.yaml installs the operator.
	OperatorNamespace = "modelserver-system"
)

// Options configure Start.
type Options struct {
	// Logf receives a line per step.
	Logf func(format string, args ...any)
	// NoBigModel skips loading BigModel (200 MiB), which only the test of
	// an interrupted fetch needs.
	NoBigModel bool
	// Images are more images to serve from the cluster's registry, pushed
	// with the environment's own once the real node is up.
	Images []Image
}

// Image is an image to push to the cluster's registry.
type Image struct {
	// Ref is repository:tag, without the registry's host.
	Ref string
	// Image is a v1.Image or a v1.ImageIndex.
	Image remote.Taggable
}

// Env is a running real-node environment.
type Env struct {
	Cluster *localcluster.Cluster
	// Root is the repository's root directory.
	Root string
	// KubectlBin is the pinned kubectl in bin/.
	KubectlBin string
	// DoubleImage is the TF Serving test double's image, for spec.image.
	DoubleImage string
	// S3Endpoint is the S3 server's URL as pods and this machine reach it.
	S3Endpoint string
	S3Creds    s3server.Credentials
	S3Process  *localcluster.Process
	// Pushed maps the Ref of each image pushed, the environment's own and
	// Options.Images, to the name the node pulls it by.
	Pushed map[string]string
	opts   Options
}

// Start brings the environment up; Stop (the cluster's) takes it down.
func Start(ctx context.Context, opts Options) (_ *Env, err error) {
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	root, err := localcluster.RepositoryRoot()
	if err != nil {
		return nil, err
	}
	if err := localcluster.RealNodeSupport(""); err != nil {
		return nil, err
	}
	// The machine has one real node, which the suites take in turn: what
	// needs no cluster is built before taking it, beside another suite's
	// use of it rather than while holding it.
	step := time.Now()
	images, err := buildImages(ctx, root)
	if err != nil {
		return nil, err
	}
	opts.Logf("built the operator's and the TF Serving double's images before taking the real node (%.1fs)", time.Since(step).Seconds())
	c, err := localcluster.Start(ctx, localcluster.Options{RealNode: true, Logf: opts.Logf})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	e := &Env{Cluster: c, Root: root, KubectlBin: filepath.Join(root, "bin", "kubectl"), Pushed: map[string]string{}, opts: opts}
	step = time.Now()
	if err := e.Push(ctx, append(images, opts.Images...)...); err != nil {
		return nil, err
	}
	e.DoubleImage = e.Pushed[doubleRef]
	opts.Logf("pushed %d images to the cluster's registry (%.1fs)", len(e.Pushed), time.Since(step).Seconds())
	step = time.Now()
	if err := e.startObjectStore(ctx); err != nil {
		return nil, fmt.Errorf("S3 server: %w", err)
	}
	opts.Logf("S3 server (versitygw) serving %s with the test models (%.1fs)", e.S3Endpoint, time.Since(step).Seconds())
	return e, nil
}

// InstallOperator applies dist/install.yaml as a user does and waits for
// the operator's rollout; it returns how long that took.
func (e *Env) InstallOperator(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	if _, err := e.Kubectl("", "apply", "--server-side", "-f", filepath.Join(e.Root, "dist", "install.yaml")); err != nil {
		return 0, err
	}
	if _, err := e.Kubectl("", "-n", OperatorNamespace, "rollout", "status", "deployment/modelserver-controller-manager", "--timeout=4m"); err != nil {
		out, _ := e.Kubectl("", "-n", OperatorNamespace, "describe", "pods")
		return 0, fmt.Errorf("the operator did not roll out: %w\n%s", err, out)
	}
	return time.Since(start), nil
}

// CredentialsSecret is the YAML of a Secret holding the S3 server's keys
// (secretKey, if not empty, in place of the real one) as the fetcher reads
// them.
func (e *Env) CredentialsSecret(name, secretKey string) string {
	if secretKey == "" {
		secretKey = e.S3Creds.SecretKey
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: %s
stringData:
  AWS_ACCESS_KEY_ID: %q
  AWS_SECRET_ACCESS_KEY: %q
  AWS_ENDPOINT_URL: %q
  AWS_S3_FORCE_PATH_STYLE: "true"
`, name, e.S3Creds.AccessKey, secretKey, e.S3Endpoint)
}

// ModelName is what the ModelServers of this environment call their
// model, so that TF Serving's URLs say /v1/models/half_plus_two.
const ModelName = "half_plus_two"

// ModelServer describes a ModelServer of this environment: a model from its
// S3 server, served by the TF Serving double.
type ModelServer struct {
	Name string
	URI  string
	// Secret holds the S3 keys (default "s3-creds", see CredentialsSecret).
	Secret string
	// Replicas default to 1. Autoscaled leaves spec.replicas out, for a
	// spec whose SpecExtra sets spec.autoscaling.
	Replicas   int
	Autoscaled bool
	// Storage is the claim's size (default 64Mi). A tmpfs volume counts
	// against the memory of the pod that writes it: ask for little.
	Storage string
	// ModelExtra are more spec.model lines, indented by four spaces.
	ModelExtra string
	// SpecExtra are more spec lines, indented by two spaces.
	SpecExtra string
}

// ModelServerYAML is the ModelServer as a user writes it.
func (e *Env) ModelServerYAML(m ModelServer) string {
	if m.Secret == "" {
		m.Secret = "s3-creds"
	}
	if m.Replicas == 0 {
		m.Replicas = 1
	}
	if m.Storage == "" {
		m.Storage = "64Mi"
	}
	replicas := fmt.Sprintf("  replicas: %d\n", m.Replicas)
	if m.Autoscaled {
		replicas = ""
	}
	return fmt.Sprintf(`apiVersion: serving.modelserver.dev/v1alpha1
kind: ModelServer
metadata:
  name: %s
spec:
  model:
    name: %s
    storageUri: %s
    credentialsSecret: %s
%s%s  image: %s
  storage:
    size: %s
%s`, m.Name, ModelName, m.URI, m.Secret, m.ModelExtra, replicas, e.DoubleImage, m.Storage, m.SpecExtra)
}

// Kubectl runs the pinned kubectl against the cluster, with stdin if
// given.
func (e *Env) Kubectl(stdin string, args ...string) (string, error) {
	cmd := exec.Command(e.KubectlBin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.Cluster.Kubeconfig)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// installedImage is the operator image dist/install.yaml names.
func installedImage(root string) (string, error) {
	data, err := os.ReadFile(filepath.Join(root, "dist", "install.yaml"))
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^\s+image: (ghcr\.io/\S+)$`).FindSubmatch(data)
	if m == nil {
		return "", fmt.Errorf("no ghcr.io image in dist/install.yaml")
	}
	return string(m[1]), nil
}

// Push pushes images to the cluster's registry and records in Pushed the
// name the node pulls each by.
func (e *Env) Push(ctx context.Context, images ...Image) error {
	for _, im := range images {
		full, err := e.Cluster.PushImage(ctx, im.Image, im.Ref)
		if err != nil {
			return fmt.Errorf("push %s: %w", im.Ref, err)
		}
		e.Pushed[im.Ref] = full
	}
	return nil
}

// doubleRef is where the TF Serving double's image is pushed.
const doubleRef = "localcluster/tfserving-double:test"

// buildImages builds the operator's image from the tree at root (under
// the name dist/install.yaml uses: the node pulls ghcr.io images from the
// cluster's registry) and the TF Serving double's.
func buildImages(ctx context.Context, root string) ([]Image, error) {
	image, err := installedImage(root)
	if err != nil {
		return nil, err
	}
	work, err := localcluster.ScratchDir()
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(work) }()
	// The index of every architecture, as `make image` pushes it: the
	// node's containerd picks the image of its own.
	operator, err := BuildOperatorImage(ctx, root, filepath.Join(work, "operator"), "", ociimage.Arches...)
	if err != nil {
		return nil, fmt.Errorf("operator image: %w", err)
	}
	double, err := buildDoubleImage(ctx, root, filepath.Join(work, "double"))
	if err != nil {
		return nil, fmt.Errorf("TF Serving double image: %w", err)
	}
	return []Image{{strings.TrimPrefix(image, "ghcr.io/"), operator}, {doubleRef, double}}, nil
}

// BuildOperatorImage builds the manager and the fetcher from the module in
// srcDir, into binDir/ARCH for each of arches (amd64 alone if none), and
// makes the image the Dockerfile describes of them, labelled with version
// unless it is "": for several architectures, their index, as `make
// image` pushes it.
func BuildOperatorImage(ctx context.Context, srcDir, binDir, version string, arches ...string) (remote.Taggable, error) {
	if len(arches) == 0 {
		arches = []string{"amd64"}
	}
	for _, arch := range arches {
		if out, err := ociimage.ImageBuildCommand(ctx, srcDir, filepath.Join(binDir, arch), arch).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build the image's binaries for linux/%s in %s: %v\n%s", arch, srcDir, err, out)
		}
	}
	images, err := ociimage.OperatorImages(binDir, arches, version, ociimage.BuildLocal)
	if err != nil {
		return nil, err
	}
	return ociimage.ImageOrIndex(images)
}

func buildDoubleImage(ctx context.Context, root, dir string) (v1.Image, error) {
	bin := filepath.Join(dir, "tensorflow_model_server")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./test/tfservingdouble")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build the double: %v\n%s", err, out)
	}
	return ociimage.BuildLocal(ociimage.Binary(bin, "/usr/bin/tensorflow_model_server", "65532:65532"))
}

// startObjectStore runs versitygw on the host's bridge address, where
// pods reach it, and loads the test models.
func (e *Env) startObjectStore(ctx context.Context) error {
	bin := filepath.Join(e.Root, "bin", "versitygw")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%s: run `make tools`", bin)
	}
	data := filepath.Join(e.Cluster.Dir, "s3")
	if err := s3server.PrepareDataDir(data); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("%s:%d", localcluster.HostAddress, port)
	e.S3Creds = s3server.NewCredentials()
	args, envv := s3server.Command(bin, addr, data, e.S3Creds)
	if e.S3Process, err = e.Cluster.StartProcess("versitygw", args[0], args[1:], envv); err != nil {
		return err
	}
	e.S3Endpoint = "http://" + addr
	if err := s3server.WaitReady(ctx, e.S3Endpoint); err != nil {
		return err
	}
	client := s3server.Client(e.S3Endpoint, e.S3Creds)
	if err := s3server.CreateBucket(ctx, client, Bucket); err != nil {
		return err
	}
	models := filepath.Join(e.Root, "test", "testdata", "tf-serving")
	for key, dir := range map[string]string{
		"half_plus_two":            "saved_model_half_plus_two_cpu",
		"half_plus_two_2_versions": "saved_model_half_plus_two_2_versions",
		"half_plus_three":          "saved_model_half_plus_three",
	} {
		if err := s3server.UploadDir(ctx, client, Bucket, key, filepath.Join(models, dir)); err != nil {
			return err
		}
	}
	if !e.opts.NoBigModel {
		if err := s3server.UploadDir(ctx, client, Bucket, "big", filepath.Join(models, "saved_model_half_plus_two_cpu")); err != nil {
			return err
		}
		big := make([]byte, BigAssetBytes)
		if _, err := rand.Read(big); err != nil {
			return err
		}
		if err := s3server.PutObject(ctx, client, Bucket, "big/00000123/assets/large.bin", big); err != nil {
			return err
		}
	}
	// An archive cut short: the fetch must refuse it, not publish half.
	return s3server.PutObject(ctx, client, Bucket, "broken/half_plus_two.tar.gz", bytes.Repeat([]byte{0x1f, 0x8b, 0x08, 0x00}, 64))
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", localcluster.HostAddress+":0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
