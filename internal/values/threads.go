package values

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/servingflags"
)

// CPULimitEnv holds the serving container's CPU limit in whole cores,
// rounded up, as the kubelet reads it: the spec's, a LimitRange's default,
// or the node's allocatable CPU where the container has no limit.
const CPULimitEnv = "MODELSERVER_CPU_LIMIT"

// ServingContainerName is the serving container's name in the pod
// template.
const ServingContainerName = "tensorflow-serving"

// AnnotationRestartChecksum is the pod template's annotation of
// RestartChecksum.
const AnnotationRestartChecksum = "checksum/config"

// threadFlags size TensorFlow's thread pools. TensorFlow sizes each to the
// cores it can be scheduled on, the whole node's unless the kubelet pins
// the container to cores of its own: a pod limited to 2 CPUs on a node of
// 64 runs 64 threads of each, which the CPU quota throttles together, and
// a request's latency grows with the node rather than with its limit.
// The kubelet puts the limit in CPULimitEnv and expands it in the
// arguments, so a limit a LimitRange adds is followed too.
var threadFlags = []string{"tensorflow_intra_op_parallelism", "tensorflow_inter_op_parallelism"}

// threadSizing are the serving container's arguments that size its thread
// pools to its CPU limit (threadFlags), but those extra args set
// themselves, and none where they configure the session otherwise: with
// --tensorflow_session_parallelism all three would be set, which TF
// Serving refuses; a session config file's thread counts would be
// overridden by the flags; a platform config file makes TF Serving ignore
// them.
func threadSizing(extraArgs []string) []string {
	set := map[string]bool{}
	for _, arg := range extraArgs {
		if name, _, _, ok := servingflags.Split(arg); ok {
			set[name] = true
		}
	}
	if set["tensorflow_session_parallelism"] || set["tensorflow_session_config_file"] || set["platform_config_file"] {
		return nil
	}
	var args []string
	for _, f := range threadFlags {
		if !set[f] {
			args = append(args, "--"+f+"=$("+CPULimitEnv+")")
		}
	}
	return args
}

// batchThreadsSized is b's batching parameters with as many batch threads
// as the container's CPU limit has cores, rounded up, where b leaves them
// to TF Serving, which runs one per core of the node (as TensorFlow's
// pools, threadFlags); "" where b sets them, or the spec sets no CPU
// limit (a LimitRange's is not followed here: the file is the
// operator's, not the kubelet's to fill in).
func batchThreadsSized(b *servingv1alpha1.Batching, r corev1.ResourceRequirements) (string, error) {
	limit, ok := r.Limits[corev1.ResourceCPU]
	if b.NumBatchThreads != nil || !ok || limit.IsZero() {
		return "", nil
	}
	sized := *b
	sized.NumBatchThreads = ptr.To(int32(min((limit.MilliValue()+999)/1000, 1024)))
	return BatchingConfig(&sized)
}

// cpuLimitEnv is the variable the kubelet fills with the serving
// container's CPU limit, in cores rounded up.
func cpuLimitEnv() corev1.EnvVar {
	return corev1.EnvVar{Name: CPULimitEnv, ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{
		ContainerName: ServingContainerName, Resource: "limits.cpu", Divisor: resource.MustParse("1"),
	}}}
}

// rollsAnyway says whether the serving pods of these values roll, whatever
// is added to them that only new pods need (the sizes of their threads,
// threadSizing and batchThreadsSized; their fetch's settings file,
// podFetches): there are none yet, their restart checksum (restart, the
// one without what is deferred) differs from the live one, or their image
// or resources change. Pods an earlier operator started keep running as
// they are until then, so that upgrading the operator restarts no serving
// pod.
func rollsAnyway(in Inputs, restart string, s *Serving) bool {
	live := servingContainer(in.LiveServingPod)
	if live == nil {
		return true
	}
	return in.LiveRestartChecksum != restart || live.Image != s.Image || !sameResources(live.Resources, s.Resources)
}

func servingContainer(pod *corev1.PodSpec) *corev1.Container {
	if pod == nil {
		return nil
	}
	i := slices.IndexFunc(pod.Containers, func(c corev1.Container) bool { return c.Name == ServingContainerName })
	if i < 0 {
		return nil
	}
	return &pod.Containers[i]
}
