// Command localcluster runs a local Kubernetes control plane (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and kwok with fake
// nodes) in the foreground until interrupted. `make cluster-up` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
)

func main() {
	nodes := flag.Int("nodes", 3, "ordinary fake nodes")
	gpuNodes := flag.Int("gpu-nodes", 1, "fake nodes with nvidia.com/gpu allocatable")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	pools := localcluster.DefaultNodePools()
	pools[0].Count, pools[1].Count = *nodes, *gpuNodes

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c, err := localcluster.Start(ctx, localcluster.Options{
		NodePools: pools,
		Logf:      func(format string, args ...any) { log.Info(fmt.Sprintf(format, args...)) },
	})
	if err != nil {
		log.Error("local cluster did not start", "err", err)
		os.Exit(1)
	}
	defer c.Stop()

	fmt.Printf("\nThe local cluster is up (%d nodes). In another shell:\n\n    export KUBECONFIG=%s\n    kubectl get nodes\n\nComponent logs: %s/logs. Ctrl-C stops the cluster and removes it.\n", c.Nodes, c.Kubeconfig, c.Dir)
	<-ctx.Done()
	log.Info("stopping the local cluster")
}
