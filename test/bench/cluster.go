package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
)

// podsPerNode is the pod capacity of each fake node. Fewer, larger nodes
// keep kwok's node heartbeats from competing with the workload.
const podsPerNode = 500

// startCluster boots a fresh control plane with room for n ModelServers
// (a serving pod and a fetch pod each).
func startCluster(ctx context.Context, cfg config, n int, log *slog.Logger) (*localcluster.Cluster, error) {
	nodes := max(3, (2*n+podsPerNode-1)/podsPerNode+1)
	c, err := localcluster.Start(ctx, localcluster.Options{
		BinDir: filepath.Join(cfg.repo, "bin"),
		NodePools: []localcluster.NodePool{
			{Name: "bench-node", Count: nodes, CPU: "2000", Memory: "8Ti", Pods: podsPerNode},
		},
		// The controllers and scheduler must not be what limits the time
		// to Ready; the same settings serve both operators and the floor.
		ComponentQPS: cfg.componentQPS,
		// Each operator's requests are counted from the audit log.
		AuditedUser:  operatorUser,
		StartTimeout: 5 * time.Minute,
		Logf:         func(format string, args ...any) { log.Debug(fmt.Sprintf(format, args...)) },
	})
	if err != nil {
		return nil, err
	}
	log.Info("cluster up", "nodes", c.Nodes, "dir", c.Dir)
	return c, nil
}

// prepareCluster readies a fresh cluster for a run: the CRD (its status
// schema opened for the peer), the run's namespace, the harness's clients
// and, for a delete window, the garbage collector watching ModelServers.
func prepareCluster(ctx context.Context, cfg config, c *localcluster.Cluster, openStatus bool, log *slog.Logger) (
	*rest.Config, kubernetes.Interface, dynamic.Interface, error) {
	if err := installCRD(ctx, cfg.repo, c, openStatus); err != nil {
		return nil, nil, nil, fmt.Errorf("install CRD: %w", err)
	}
	if err := createNamespace(ctx, c, benchNamespace); err != nil {
		return nil, nil, nil, err
	}
	admin, cs, dyn, err := harnessClients(c)
	if err != nil {
		return nil, nil, nil, err
	}
	return admin, cs, dyn, cfg.readyForDelete(ctx, c, cs, dyn, log)
}

// installCRD installs the ModelServer CRD. For the peer, whose status
// (conditions without observedGeneration, deployedRelease) is not the
// operator's, the status schema is opened as an Operator SDK Helm
// operator's CRD has it.
func installCRD(ctx context.Context, repo string, c *localcluster.Cluster, openStatus bool) error {
	crd, err := readCRD(repo)
	if err != nil {
		return err
	}
	if openStatus {
		for i := range crd.Spec.Versions {
			v := &crd.Spec.Versions[i]
			if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
				v.Schema.OpenAPIV3Schema.Properties["status"] = apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptrTo(true),
				}
			}
		}
	}
	return c.CreateCRDs(ctx, time.Minute, crd)
}

// readCRD reads the ModelServer CRD from the repository.
func readCRD(repo string) (*apiextensionsv1.CustomResourceDefinition, error) {
	b, err := os.ReadFile(filepath.Join(repo, "config/crd/bases/serving.modelserver.dev_modelservers.yaml"))
	if err != nil {
		return nil, err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(b, crd); err != nil {
		return nil, err
	}
	return crd, nil
}

func createNamespace(ctx context.Context, c *localcluster.Cluster, name string) error {
	cs, err := c.Clientset()
	if err != nil {
		return err
	}
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	// Pods are admitted once the namespace's default ServiceAccount exists.
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// buildBinaries builds the operator and the peer into dir.
func buildBinaries(repo, dir string) (manager, peer string, err error) {
	manager, peer = filepath.Join(dir, "manager"), filepath.Join(dir, "peer")
	for _, b := range []struct{ dir, out, pkg string }{
		{repo, manager, "./cmd/manager"},
		{filepath.Join(repo, "test/bench/peer"), peer, "."},
	} {
		cmd := exec.Command("go", "build", "-trimpath", "-o", b.out, b.pkg)
		cmd.Dir = b.dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("build %s: %v\n%s", b.pkg, err, out)
		}
	}
	return manager, peer, nil
}

func ptrTo[T any](v T) *T { return &v }

// harnessClients are the harness's admin clients, with client limits high
// enough that the apiserver, not a client's rate limiter, sets the pace.
func harnessClients(c *localcluster.Cluster) (*rest.Config, kubernetes.Interface, dynamic.Interface, error) {
	admin := rest.CopyConfig(c.Config)
	admin.QPS, admin.Burst = 1000, 2000
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(admin)
	if err != nil {
		return nil, nil, nil, err
	}
	return admin, cs, dyn, nil
}
