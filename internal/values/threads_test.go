package values

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

const (
	intraSized = "--tensorflow_intra_op_parallelism=$(MODELSERVER_CPU_LIMIT)"
	interSized = "--tensorflow_inter_op_parallelism=$(MODELSERVER_CPU_LIMIT)"
)

// TensorFlow's thread pools follow the container's CPU limit, but where
// extra args size them, or configure the session another way.
func TestTheThreadPoolsFollowTheCPULimitUnlessTheExtraArgsSizeThem(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra []string
		want  []string
	}{
		{"none", nil, []string{intraSized, interSized}},
		{"intra-op set", []string{"--tensorflow_intra_op_parallelism=8"}, []string{interSized}},
		{"both set, to TensorFlow's own choice", []string{"--tensorflow_intra_op_parallelism=0", "--tensorflow_inter_op_parallelism=0"}, nil},
		// All three would keep TF Serving from starting.
		{"the session's parallelism", []string{"--tensorflow_session_parallelism=4"}, nil},
		{"a session config file", []string{"--tensorflow_session_config_file=/etc/tf/session.pbtxt"}, nil},
		{"a platform config file", []string{"--platform_config_file=/etc/tf/platform.pbtxt"}, nil},
		{"another flag", []string{"--rest_api_num_threads=16"}, []string{intraSized, interSized}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := For(modelServer(extraArgs(tc.extra...)), fetched)
			if err != nil {
				t.Fatal(err)
			}
			args := v.Serving.Args
			var sized []string
			for _, a := range args {
				if strings.Contains(a, "$(") {
					sized = append(sized, a)
				}
			}
			if !slices.Equal(sized, tc.want) {
				t.Errorf("sized flags %q, want %q", sized, tc.want)
			}
			if !slices.Equal(args[len(args)-len(tc.extra):], tc.extra) {
				t.Errorf("args %q, want the extra args last", args)
			}
			hasEnv := slices.ContainsFunc(v.Serving.Env, func(e corev1.EnvVar) bool { return e.Name == CPULimitEnv })
			if hasEnv != (len(tc.want) > 0) {
				t.Errorf("env %v: the CPU limit's variable %v, want %v", v.Serving.Env, hasEnv, len(tc.want) > 0)
			}
		})
	}
}

// Pods an earlier operator started without the sizing keep running as
// they are: upgrading the operator restarts no serving pod. They get it
// when they roll anyway: a new model, image or resources.
func TestPodsStartedWithoutTheSizingGetItWhenTheyRollAnyway(t *testing.T) {
	limited := func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	}
	sized, err := For(modelServer(limited), fetched)
	if err != nil {
		t.Fatal(err)
	}
	// The Deployment as the earlier operator rendered it.
	args := slices.DeleteFunc(slices.Clone(sized.Serving.Args), func(a string) bool { return strings.Contains(a, "$(") })
	var served []ModelEntry
	for _, m := range sized.Models {
		served = append(served, ModelEntry{Name: m.Name, BasePath: m.BasePath})
	}
	earlier := fetched
	earlier.LiveServingPod = &corev1.PodSpec{Containers: []corev1.Container{{
		Name: ServingContainerName, Image: sized.Serving.Image, Args: args, Resources: sized.Serving.Resources,
	}}}
	earlier.LiveRestartChecksum = restartChecksum(args, sized, served)

	kept, err := For(modelServer(limited), earlier)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(kept.Serving.Args, args) || kept.Serving.RestartChecksum != earlier.LiveRestartChecksum || len(kept.Serving.Env) != 0 {
		t.Fatalf("the earlier operator's pods: args %q, checksum %s, env %v; want them as they run (%q, %s)",
			kept.Serving.Args, kept.Serving.RestartChecksum, kept.Serving.Env, args, earlier.LiveRestartChecksum)
	}

	rolled := map[string]struct {
		ms *servingv1alpha1.ModelServer
		in Inputs
	}{
		"a new model": {modelServer(limited), func() Inputs { in := earlier; in.Served = map[string]string{"resnet": "gen00002"}; return in }()},
		"a new image": {modelServer(limited, func(ms *servingv1alpha1.ModelServer) { ms.Spec.Image = "tensorflow/serving:2.19.2" }), earlier},
		"a CPU limit": {modelServer(func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
		}), earlier},
		"other args": {modelServer(limited, extraArgs("--rest_api_num_threads=16")), earlier},
	}
	for what, tc := range rolled {
		v, err := For(tc.ms, tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(v.Serving.Args, intraSized) || !slices.ContainsFunc(v.Serving.Env, func(e corev1.EnvVar) bool { return e.Name == CPULimitEnv }) {
			t.Errorf("%s: args %q, env %v; want the pods that roll sized", what, v.Serving.Args, v.Serving.Env)
		}
	}

	// Pods that have it keep it.
	now := fetched
	now.LiveServingPod = &corev1.PodSpec{Containers: []corev1.Container{{
		Name: ServingContainerName, Image: sized.Serving.Image, Args: sized.Serving.Args, Resources: sized.Serving.Resources,
	}}}
	now.LiveRestartChecksum = sized.Serving.RestartChecksum
	again, err := For(modelServer(limited), now)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again.Serving.Args, sized.Serving.Args) || again.Serving.RestartChecksum != sized.Serving.RestartChecksum {
		t.Errorf("sized pods: args %q, checksum %s; want them unchanged", again.Serving.Args, again.Serving.RestartChecksum)
	}
}

// TF Serving runs a batch thread per core of the node too, unless the
// batching parameters say how many: a CPU limit of the spec sizes them.
func TestBatchThreadsFollowTheSpecsCPULimit(t *testing.T) {
	batching := func(threads *int32, cpu string) func(*servingv1alpha1.ModelServer) {
		return func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Batching = &servingv1alpha1.Batching{MaxBatchSize: 16, NumBatchThreads: threads}
			if cpu != "" {
				ms.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
			}
		}
	}
	three := int32(3)
	for _, tc := range []struct {
		name string
		ms   *servingv1alpha1.ModelServer
		want string
	}{
		{"a limit of 1500m", modelServer(batching(nil, "1500m")), "num_batch_threads { value: 2 }"},
		{"a limit of 100m", modelServer(batching(nil, "100m")), "num_batch_threads { value: 1 }"},
		{"the spec's count", modelServer(batching(&three, "8")), "num_batch_threads { value: 3 }"},
		{"no limit", modelServer(batching(nil, "")), ""},
	} {
		v, err := For(tc.ms, fetched)
		if err != nil {
			t.Fatal(err)
		}
		cfg := v.ConfigFiles[BatchingConfigFile]
		if got := strings.Count(cfg, "num_batch_threads"); tc.want == "" && got != 0 || tc.want != "" && !strings.Contains(cfg, tc.want) {
			t.Errorf("%s: batching parameters\n%s\nwant %q", tc.name, cfg, tc.want)
		}
	}

	// An earlier operator's pods keep their parameters until they roll.
	sized, err := For(modelServer(batching(nil, "2")), fetched)
	if err != nil {
		t.Fatal(err)
	}
	unsized := modelServer(batching(nil, "2"))
	unsized.Spec.Batching.NumBatchThreads = nil
	cfg, err := BatchingConfig(unsized.Spec.Batching)
	if err != nil {
		t.Fatal(err)
	}
	args := slices.DeleteFunc(slices.Clone(sized.Serving.Args), func(a string) bool { return strings.Contains(a, "$(") })
	earlier := fetched
	earlier.LiveServingPod = &corev1.PodSpec{Containers: []corev1.Container{{
		Name: ServingContainerName, Image: sized.Serving.Image, Args: args, Resources: sized.Serving.Resources,
	}}}
	unsizedValues := *sized
	unsizedValues.ConfigFiles = map[string]string{BatchingConfigFile: cfg, MonitoringConfigFile: sized.ConfigFiles[MonitoringConfigFile]}
	earlier.LiveRestartChecksum = restartChecksum(args, &unsizedValues, []ModelEntry{{Name: sized.Models[0].Name, BasePath: sized.Models[0].BasePath}})
	kept, err := For(modelServer(batching(nil, "2")), earlier)
	if err != nil {
		t.Fatal(err)
	}
	if got := kept.ConfigFiles[BatchingConfigFile]; got != cfg || kept.Serving.RestartChecksum != earlier.LiveRestartChecksum {
		t.Errorf("the earlier operator's pods: batching parameters\n%s\nchecksum %s; want them as they run\n%s\n%s", got, kept.Serving.RestartChecksum, cfg, earlier.LiveRestartChecksum)
	}
}
