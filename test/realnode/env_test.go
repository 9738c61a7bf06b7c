// Package realnode runs the operator as users run it, on a real node: its
// image built from this tree and pulled by containerd from the cluster's
// registry, `kubectl apply -f dist/install.yaml`, its fetch Jobs
// downloading real SavedModels from a real S3 server (versitygw) into real
// volumes, and serving pods (a TF Serving test double, test/tfservingdouble)
// passing the real readiness probe. Where the machine cannot run
// containers, every test here skips with one line.
package realnode

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
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
	"github.com/modelserver-dev/modelserver-operator/internal/ociimage"
	"github.com/modelserver-dev/modelserver-operator/test/s3server"
)

// The S3 bucket and the objects every test can use.
const (
	bucket           = "models"
	halfPlusTwo      = "s3://models/half_plus_two"
	twoVersions      = "s3://models/half_plus_two_2_versions"
	corruptedArchive = "s3://models/broken/half_plus_two.tar.gz"
	bigModel         = "s3://models/big"
	// Written to a tmpfs volume, the asset counts against the fetch pod's
	// memory limit (512Mi): kept well below it.
	bigAssetBytes = 200 << 20
	operatorNS    = "modelserver-system"
)

// env is the real-node environment the tests share: starting it costs
// about a minute (images, S3 server, the operator's rollout).
type env struct {
	cluster    *localcluster.Cluster
	cs         kubernetes.Interface
	root       string // the repository
	kubectlBin string
	double     string // the TF Serving double's image
	s3         string // endpoint, as pods reach it
	creds      s3server.Credentials
	s3Process  *localcluster.Process
}

var shared struct {
	once sync.Once
	env  *env
	err  error
	skip error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.env != nil {
		shared.env.cluster.Stop()
		if err := shared.env.cluster.TeardownError(); err != nil {
			fmt.Fprintln(os.Stderr, "real node teardown:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// realNode returns the shared environment, starting it on first use, or
// skips the test in one line where the machine cannot run containers.
func realNode(t *testing.T) *env {
	t.Helper()
	shared.once.Do(func() {
		if err := localcluster.RealNodeSupport(""); err != nil {
			if os.Getenv("LOCALCLUSTER_REQUIRE_REAL_NODE") != "" {
				shared.err = fmt.Errorf("LOCALCLUSTER_REQUIRE_REAL_NODE is set, but %w", err)
			} else {
				shared.skip = err
			}
			return
		}
		shared.env, shared.err = startEnv(t)
	})
	if shared.skip != nil {
		t.Skip(shared.skip)
	}
	if shared.err != nil {
		t.Fatalf("real-node environment: %v", shared.err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(shared.env.cluster.LogTails(20))
			t.Log(shared.env.kubectlOut("-n", operatorNS, "logs", "deploy/modelserver-controller-manager", "--tail=40"))
		}
	})
	return shared.env
}

func startEnv(t *testing.T) (_ *env, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root, err := filepath.Abs("../..")
	if err != nil {
		return nil, err
	}
	c, err := localcluster.Start(ctx, localcluster.Options{RealNode: true, Logf: t.Logf})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	cs, err := c.Clientset()
	if err != nil {
		return nil, err
	}
	e := &env{cluster: c, cs: cs, root: root, kubectlBin: filepath.Join(root, "bin", "kubectl")}
	if err := e.pushOperatorImage(ctx); err != nil {
		return nil, fmt.Errorf("operator image: %w", err)
	}
	if e.double, err = e.pushDoubleImage(ctx); err != nil {
		return nil, fmt.Errorf("TF Serving double image: %w", err)
	}
	if err := e.startObjectStore(ctx); err != nil {
		return nil, fmt.Errorf("S3 server: %w", err)
	}
	start := time.Now()
	if _, err := e.run("", "apply", "--server-side", "-f", filepath.Join(root, "dist", "install.yaml")); err != nil {
		return nil, err
	}
	if _, err := e.run("", "-n", operatorNS, "rollout", "status", "deployment/modelserver-controller-manager", "--timeout=4m"); err != nil {
		return nil, fmt.Errorf("the operator did not roll out: %w\n%s", err,
			e.kubectlOut("-n", operatorNS, "describe", "pods"))
	}
	t.Logf("the operator's Deployment was available %.1fs after kubectl apply -f dist/install.yaml", time.Since(start).Seconds())
	return e, nil
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

// pushOperatorImage builds the image the Dockerfile describes, from this
// tree, and pushes it under the name dist/install.yaml uses: the node
// pulls ghcr.io images from the cluster's registry.
func (e *env) pushOperatorImage(ctx context.Context) error {
	image, err := installedImage(e.root)
	if err != nil {
		return err
	}
	bin := filepath.Join(e.cluster.Dir, "manager")
	if out, err := ociimage.ManagerBuildCommand(ctx, e.root, bin).CombinedOutput(); err != nil {
		return fmt.Errorf("build the manager: %v\n%s", err, out)
	}
	spec, err := ociimage.Operator(bin)
	if err != nil {
		return err
	}
	img, err := ociimage.Build(spec)
	if err != nil {
		return err
	}
	_, err = e.cluster.PushImage(ctx, img, strings.TrimPrefix(image, "ghcr.io/"))
	return err
}

func (e *env) pushDoubleImage(ctx context.Context) (string, error) {
	bin := filepath.Join(e.cluster.Dir, "tensorflow_model_server")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./test/tfservingdouble")
	build.Dir = e.root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the double: %v\n%s", err, out)
	}
	img, err := ociimage.Build(ociimage.Binary(bin, "/usr/bin/tensorflow_model_server", "65532:65532"))
	if err != nil {
		return "", err
	}
	return e.cluster.PushImage(ctx, img, "localcluster/tfserving-double:test")
}

// startObjectStore runs versitygw on the host's bridge address, where
// pods reach it, and loads the test models.
func (e *env) startObjectStore(ctx context.Context) error {
	bin := filepath.Join(e.root, "bin", "versitygw")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%s: run `make tools`", bin)
	}
	data := filepath.Join(e.cluster.Dir, "s3")
	if err := s3server.PrepareDataDir(data); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("%s:%d", localcluster.HostAddress, port)
	e.creds = s3server.NewCredentials()
	args, envv := s3server.Command(bin, addr, data, e.creds)
	if e.s3Process, err = e.cluster.StartProcess("versitygw", args[0], args[1:], envv); err != nil {
		return err
	}
	e.s3 = "http://" + addr
	if err := s3server.WaitReady(ctx, e.s3); err != nil {
		return err
	}
	client := s3server.Client(e.s3, e.creds)
	if err := s3server.CreateBucket(ctx, client, bucket); err != nil {
		return err
	}
	models := filepath.Join(e.root, "test", "testdata", "tf-serving")
	for key, dir := range map[string]string{
		"half_plus_two":            "saved_model_half_plus_two_cpu",
		"half_plus_two_2_versions": "saved_model_half_plus_two_2_versions",
		"big":                      "saved_model_half_plus_two_cpu",
	} {
		if err := s3server.UploadDir(ctx, client, bucket, key, filepath.Join(models, dir)); err != nil {
			return err
		}
	}
	// A model whose download takes long enough to be interrupted: a real
	// SavedModel with a large asset beside it.
	big := make([]byte, bigAssetBytes)
	if _, err := rand.Read(big); err != nil {
		return err
	}
	if err := s3server.PutObject(ctx, client, bucket, "big/00000123/assets/large.bin", big); err != nil {
		return err
	}
	// An archive cut short: the fetch must refuse it, not publish half.
	return s3server.PutObject(ctx, client, bucket, "broken/half_plus_two.tar.gz", bytes.Repeat([]byte{0x1f, 0x8b, 0x08, 0x00}, 64))
}

// run runs kubectl against the cluster, with stdin if given.
func (e *env) run(stdin string, args ...string) (string, error) {
	cmd := exec.Command(e.kubectlBin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.cluster.Kubeconfig)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func (e *env) kubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, err := e.run(stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *env) kubectlOut(args ...string) string {
	out, _ := e.run("", args...)
	return out
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", localcluster.HostAddress+":0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
