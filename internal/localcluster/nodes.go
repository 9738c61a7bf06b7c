package localcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// NodePool is a group of identical fake nodes.
type NodePool struct {
	// Name prefixes the nodes' names: <Name>-0, <Name>-1, ...
	Name   string
	Count  int
	CPU    string // allocatable cpu, e.g. "16"
	Memory string // allocatable memory, e.g. "64Gi"
	Pods   int    // allocatable pods
	// GPUs is the nvidia.com/gpu allocatable. Nodes with GPUs also carry the
	// label nvidia.com/gpu.present=true and the taint nvidia.com/gpu:NoSchedule,
	// as GPU node pools usually do, so that only pods that tolerate it land there.
	GPUs   int
	Labels map[string]string
}

// GPUResource is the extended resource name of NVIDIA GPUs.
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// kwokNodeAnnotation marks the nodes kwok manages.
const kwokNodeAnnotation = "kwok.x-k8s.io/node"

// zones spreads nodes over three zones so topology spread constraints have
// something to spread over.
var zones = []string{"zone-a", "zone-b", "zone-c"}

// DefaultNodePools is three ordinary nodes and one GPU node.
func DefaultNodePools() []NodePool {
	return []NodePool{
		{Name: "kwok-node", Count: 3, CPU: "16", Memory: "64Gi", Pods: 110},
		{Name: "kwok-gpu-node", Count: 1, CPU: "16", Memory: "64Gi", Pods: 110, GPUs: 4},
	}
}

// Node builds the i-th node of the pool.
func (p NodePool) Node(i int) (*corev1.Node, error) {
	cpu, err := resource.ParseQuantity(p.CPU)
	if err != nil {
		return nil, fmt.Errorf("node pool %s: cpu: %w", p.Name, err)
	}
	mem, err := resource.ParseQuantity(p.Memory)
	if err != nil {
		return nil, fmt.Errorf("node pool %s: memory: %w", p.Name, err)
	}
	name := fmt.Sprintf("%s-%d", p.Name, i)
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    cpu,
		corev1.ResourceMemory: mem,
		corev1.ResourcePods:   *resource.NewQuantity(int64(p.Pods), resource.DecimalSI),
		// A real node reports its disk, which pods with copies of their
		// own (storage mode PerPod) request.
		corev1.ResourceEphemeralStorage: resource.MustParse("200Gi"),
	}
	labels := map[string]string{
		"kubernetes.io/hostname":      name,
		"kubernetes.io/os":            "linux",
		"kubernetes.io/arch":          "amd64",
		"topology.kubernetes.io/zone": zones[i%len(zones)],
		"type":                        "kwok",
	}
	var taints []corev1.Taint
	if p.GPUs > 0 {
		capacity[GPUResource] = *resource.NewQuantity(int64(p.GPUs), resource.DecimalSI)
		labels["nvidia.com/gpu.present"] = "true"
		taints = append(taints, corev1.Taint{Key: string(GPUResource), Value: "present", Effect: corev1.TaintEffectNoSchedule})
	}
	for k, v := range p.Labels {
		labels[k] = v
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      labels,
			Annotations: map[string]string{kwokNodeAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
		},
		Spec:   corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}, nil
}

func createNodes(ctx context.Context, cs kubernetes.Interface, pools []NodePool) (int, error) {
	n := 0
	for _, pool := range pools {
		for i := range pool.Count {
			node, err := pool.Node(i)
			if err != nil {
				return n, err
			}
			if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
				return n, fmt.Errorf("create node %s: %w", node.Name, err)
			}
			n++
		}
	}
	return n, nil
}

// createStorageClass creates the class kwok's stages provision, the
// default one unless a real node's class is.
func createStorageClass(ctx context.Context, cs kubernetes.Interface, isDefault bool) error {
	immediate := storagev1.VolumeBindingImmediate
	reclaim := corev1.PersistentVolumeReclaimDelete
	sc := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        StorageClass,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": fmt.Sprint(isDefault)},
		},
		Provisioner:       "localcluster.modelserver.dev/volume",
		ReclaimPolicy:     &reclaim,
		VolumeBindingMode: &immediate,
	}
	_, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{})
	return err
}
