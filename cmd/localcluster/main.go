// Command localcluster runs a local Kubernetes control plane (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and kwok with fake
// nodes) in the foreground until interrupted. `make cluster-up` runs it.
//
// With -real-node (`make cluster-up REAL_NODE=1`) it runs the real-node
// environment the end-to-end tests use instead: a real node (kubelet,
// containerd, runc, kube-proxy), a registry, a real S3 server holding TF
// SavedModels, the TF Serving double's image and, unless -no-operator, the
// operator installed from its image with dist/install.yaml.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
	"github.com/modelserver-dev/modelserver-operator/test/realenv"
)

func main() {
	nodes := flag.Int("nodes", 3, "ordinary fake nodes (not with -real-node)")
	gpuNodes := flag.Int("gpu-nodes", 1, "fake nodes with nvidia.com/gpu allocatable (not with -real-node)")
	realNode := flag.Bool("real-node", false, "run a real node (containerd, runc; needs root), a registry, an S3 server with test models and the operator from its image")
	noOperator := flag.Bool("no-operator", false, "with -real-node: do not install the operator")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	logf := func(format string, args ...any) { log.Info(fmt.Sprintf(format, args...)) }
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if *realNode {
		var fakeNodeFlags []string
		flag.Visit(func(f *flag.Flag) {
			if f.Name == "nodes" || f.Name == "gpu-nodes" {
				fakeNodeFlags = append(fakeNodeFlags, "-"+f.Name)
			}
		})
		if len(fakeNodeFlags) > 0 {
			log.Error("-real-node runs no fake nodes", "flags", strings.Join(fakeNodeFlags, " "))
			os.Exit(2)
		}
		os.Exit(runRealNode(ctx, log, logf, !*noOperator))
	}
	if *noOperator {
		log.Error("-no-operator only applies with -real-node: without it no operator is installed anyway")
		os.Exit(2)
	}

	pools := localcluster.DefaultNodePools()
	pools[0].Count, pools[1].Count = *nodes, *gpuNodes
	c, err := localcluster.Start(ctx, localcluster.Options{NodePools: pools, Logf: logf})
	if err != nil {
		log.Error("local cluster did not start", "err", err)
		os.Exit(1)
	}
	defer c.Stop()
	ctx, stopSignals := ownSignals()
	defer stopSignals()

	fmt.Printf("\nThe local cluster is up (%d nodes). In another shell:\n\n    export KUBECONFIG=%s\n    kubectl get nodes\n\nComponent logs: %s/logs. Ctrl-C stops the cluster and removes it.\n", c.Nodes, c.Kubeconfig, c.Dir)
	<-ctx.Done()
	log.Info("stopping the local cluster")
}

// runRealNode brings the real-node environment up, prints how to use it,
// and holds it until ctx ends; it returns the exit code.
func runRealNode(ctx context.Context, log *slog.Logger, logf func(string, ...any), installOperator bool) (code int) {
	// Checked before anything starts so that a machine without containers
	// gets one line, not a half-started cluster's error.
	if err := localcluster.RealNodeSupport(""); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env, err := realenv.Start(ctx, realenv.Options{Logf: logf, NoBigModel: true})
	if err != nil {
		log.Error("real-node environment did not start", "err", err)
		return 1
	}
	ctx, stopSignals := ownSignals()
	defer stopSignals()
	defer func() {
		log.Info("stopping the real-node environment")
		env.Cluster.Stop()
		if err := env.Cluster.TeardownError(); err != nil {
			log.Error("the real node's teardown left something behind", "err", err)
			code = 1
		}
	}()
	if installOperator {
		took, err := env.InstallOperator(ctx)
		if err != nil {
			log.Error("operator not installed", "err", err)
			return 1
		}
		log.Info("operator installed from its image", "namespace", realenv.OperatorNamespace, "took", took.Round(100*time.Millisecond).String())
	}

	printRealNodeUsage(env, installOperator)
	<-ctx.Done()
	return code
}

// ownSignals takes SIGINT, SIGTERM and SIGHUP over from localcluster once
// the cluster is up. The package's own handler stops every cluster and
// exits 128+signal, racing this command's stop, which exits 0 when the
// teardown is clean; Ctrl-C is how cluster-up is meant to end, so it must
// not look like a failure. Ignore drops the package's handler: a signal
// arriving before Notify is ignored, not fatal.
func ownSignals() (context.Context, context.CancelFunc) {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	return signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
}

// exampleName is the ModelServer (and its Service) of the printed example.
const exampleName = "half-plus-two"

func printRealNodeUsage(env *realenv.Env, operatorInstalled bool) {
	c := env.Cluster
	var b strings.Builder
	fmt.Fprintf(&b, `
The local cluster is up with a real node (kubelet, kube-proxy, containerd, runc;
pods on 198.18.0.0/24, Services on 198.19.0.0/16). In another shell:

    export KUBECONFIG=%s
    export PATH=$PWD/bin:$PATH
    kubectl get nodes

Registry:  %s (plain HTTP). The node pulls images named ghcr.io/<path>
           from it as %[2]s/<path>, so dist/install.yaml applies unchanged.
S3 server: %s (versitygw; reachable from pods and from this machine)
           access key %s
           secret key %s
           models     %s (version 123)
                      %s (versions 123 and 124)
                      %s (version 123)
                      %s (a corrupted archive: its fetch fails)
TF Serving test double's image: %s
           (test/tfservingdouble: TF Serving's REST status, metrics and the
           half_plus_* arithmetic models; not a TensorFlow runtime)
`, c.Kubeconfig, c.Registry, env.S3Endpoint, env.S3Creds.AccessKey, env.S3Creds.SecretKey,
		realenv.HalfPlusTwo, realenv.TwoVersions, realenv.HalfPlusThree, realenv.CorruptedArchive, env.DoubleImage)
	if operatorInstalled {
		fmt.Fprintf(&b, "Operator:  in namespace %s, from its image built from this tree (kubectl apply -f dist/install.yaml)\n", realenv.OperatorNamespace)
	} else {
		b.WriteString("Operator:  not installed (-no-operator): `make install run` runs it on this machine, or\n           `kubectl apply --server-side -f dist/install.yaml` from its image, already in the registry\n")
	}
	fmt.Fprintf(&b, `
A ModelServer that works here, with the Secret holding the S3 keys
(save it to a file and kubectl apply -f it):

---
%s---
%s
Then:

    kubectl wait --for=condition=Ready ms/%[3]s --timeout=5m
    kubectl get ms %[3]s
    curl http://$(kubectl get svc %[3]s -o jsonpath='{.spec.clusterIP}'):8501/v1/models/half_plus_two
    curl -d '{"instances": [1.0, 2.0, 5.0]}' http://$(kubectl get svc %[3]s -o jsonpath='{.spec.clusterIP}'):8501/v1/models/half_plus_two:predict

Component logs: %s/logs. Ctrl-C stops everything and tears the real node down.
`, env.CredentialsSecret("s3-creds", ""), env.ModelServerYAML(realenv.ModelServer{Name: exampleName, URI: realenv.HalfPlusTwo}), exampleName, c.Dir)
	fmt.Print(b.String())
}
