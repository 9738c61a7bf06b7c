package helmcharts_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	helmcharts "github.com/modelserver-dev/modelserver-operator/helm-charts"
	"github.com/modelserver-dev/modelserver-operator/internal/fetchcontract"
	"github.com/modelserver-dev/modelserver-operator/internal/names"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

const (
	namespace    = "ml"
	chartVersion = "0.1.0"
	fetchImage   = "example.com/op:1"
)

// A case is one ModelServer rendered through values.For and the chart.
type renderCase struct {
	name string
	ms   *servingv1alpha1.ModelServer
	in   values.Inputs
	// check makes the case's own assertions, after the ones every case gets.
	check func(t *testing.T, v *values.Values, objs *objects)
}

func renderCases() []renderCase { //nolint:gocognit // a table of cases: each case's check closure counts toward this function, though none is complex on its own
	full := modelServer("resnet", func(ms *servingv1alpha1.ModelServer) {
		ms.UID = types.UID("6b7b1c9e-1111-4a2b-9c3d-0123456789ab")
		ms.Spec.Model.CredentialsSecret = "s3-credentials"
		ms.Spec.Replicas = ptr.To[int32](2)
		ms.Spec.Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("2"),
				corev1.ResourceMemory: resource.MustParse("4Gi"),
			},
			Limits: corev1.ResourceList{
				corev1.ResourceMemory:                 resource.MustParse("8Gi"),
				corev1.ResourceName("nvidia.com/gpu"): resource.MustParse("1"),
			},
		}
		ms.Spec.PodTemplate = servingv1alpha1.PodTemplate{
			// Values YAML would read as numbers, booleans or null unless
			// quoted.
			Labels: map[string]string{"team": "vision", "cost-center": "1234", "gpu": "true", "legacy": "on",
				"mode": "0755", "exp": "1e3", "nothing": "null", "empty": ""},
			Annotations: map[string]string{"example.com/owner": "vision@example.com", "sidecar.istio.io/inject": "false",
				"example.com/note": "line one\nline two: \"quoted\" # not a comment", "example.com/json": `{"a": [1, 2]}`,
				"example.com/number": "42", "example.com/spaces": "  padded  ", "example.com/tilde": "~"},
			NodeSelector: map[string]string{"kubernetes.io/os": "linux", "node.example.com/pool": "gpu"},
			Tolerations: []corev1.Toleration{
				{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
			},
			Affinity: &corev1.Affinity{
				NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
						NodeSelectorTerms: []corev1.NodeSelectorTerm{{
							MatchExpressions: []corev1.NodeSelectorRequirement{{
								Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"},
							}},
						}},
					},
				},
				PodAntiAffinity: &corev1.PodAntiAffinity{
					PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
						Weight: 100,
						PodAffinityTerm: corev1.PodAffinityTerm{
							TopologyKey:   "kubernetes.io/hostname",
							LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/instance": "resnet"}},
						},
					}},
				},
			},
			ServiceAccountName: "models-reader",
			ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "registry"}, {Name: "mirror"}},
			Env: []corev1.EnvVar{
				{Name: "TF_CPP_MIN_LOG_LEVEL", Value: "2"},
				{Name: "OMP_NUM_THREADS", Value: "4"},
				{Name: "API_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "tokens"}, Key: "api",
				}}},
			},
		}
	})

	return []renderCase{
		{
			name: "minimal spec, first fetch under way",
			ms:   modelServer("resnet", nil),
			check: func(t *testing.T, v *values.Values, objs *objects) {
				d := objs.deployment(t)
				if got := *d.Spec.Replicas; got != 1 {
					t.Errorf("deployment replicas = %d, want 1: the pods start with the first fetch and wait for it", got)
				}
				dest := v.Fetches[0].Args[len(v.Fetches[0].Args)-1]
				if v.Models[0].BasePath != dest || !strings.Contains(objs.configMap(t).Data[values.ModelConfigFile], `base_path: "`+dest+`"`) {
					t.Errorf("base path %q, want the fetch's destination %q in the model config", v.Models[0].BasePath, dest)
				}
				if len(d.OwnerReferences) != 0 {
					t.Errorf("owner references without an owner: %v", d.OwnerReferences)
				}
				if got := objs.service(t).Spec.Type; got != corev1.ServiceTypeClusterIP {
					t.Errorf("service type = %q, want ClusterIP", got)
				}
				wantArgs := []string{"--port=8500", "--rest_api_port=8501", "--model_config_file=/etc/modelserver/models.config",
					"--model_config_file_poll_wait_seconds=30", "--allow_version_labels_for_unavailable_models=true",
					"--monitoring_config_file=/etc/modelserver/monitoring.config",
					"--tensorflow_intra_op_parallelism=$(MODELSERVER_CPU_LIMIT)", "--tensorflow_inter_op_parallelism=$(MODELSERVER_CPU_LIMIT)"}
				if got := d.Spec.Template.Spec.Containers[0].Args; !slices.Equal(got, wantArgs) {
					t.Errorf("serving args = %q, want %q", got, wantArgs)
				}
				c := objs.claim(t)
				if c.Spec.StorageClassName != nil {
					t.Errorf("claim storageClassName = %q, want unset (the default class)", *c.Spec.StorageClassName)
				}
				if got := c.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(resource.MustParse("10Gi")) != 0 {
					t.Errorf("claim size = %s, want 10Gi", got.String())
				}
				if ps := d.Spec.Template.Spec; ps.Affinity != nil || ps.Tolerations != nil ||
					ps.ImagePullSecrets != nil || ps.ServiceAccountName != "" {
					t.Errorf("unset pod settings rendered: %+v", ps)
				}
				// The default image is built for linux/amd64 alone.
				amd64 := map[string]string{corev1.LabelArchStable: "amd64"}
				if got := d.Spec.Template.Spec.NodeSelector; !maps.Equal(got, amd64) {
					t.Errorf("serving pods' nodeSelector = %v, want %v", got, amd64)
				}
				if got := objs.jobs[0].Spec.Template.Spec.NodeSelector; !maps.Equal(got, amd64) {
					t.Errorf("fetch pod's nodeSelector = %v, want %v", got, amd64)
				}
				// The one variable the kubelet fills with the container's
				// CPU limit in cores, rounded up, for the thread pools.
				wantEnv := []corev1.EnvVar{{Name: "MODELSERVER_CPU_LIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{
					ContainerName: "tensorflow-serving", Resource: "limits.cpu", Divisor: resource.MustParse("1")}}}}
				if env := d.Spec.Template.Spec.Containers[0].Env; !equality.Semantic.DeepEqual(env, wantEnv) {
					t.Errorf("serving env = %v, want %v", env, wantEnv)
				}
				// The threshold the chart had before loadTimeoutSeconds: a
				// new default would roll every serving pod at the operator's
				// upgrade.
				if p := d.Spec.Template.Spec.Containers[0].StartupProbe; p == nil || p.FailureThreshold != 600 {
					t.Errorf("startup probe = %+v, want 600 checks, as before the field", p)
				}
			},
		},
		{
			name: "fetched, owned, scaled",
			ms: modelServer("resnet", func(ms *servingv1alpha1.ModelServer) {
				ms.UID = "0d3c6f9a-2222-4b7e-8f00-fedcba987654"
				ms.Spec.Replicas = ptr.To[int32](3)
			}),
			in: values.Inputs{Served: fetched},
			check: func(t *testing.T, v *values.Values, objs *objects) {
				if got := *objs.deployment(t).Spec.Replicas; got != 3 {
					t.Errorf("deployment replicas = %d, want 3", got)
				}
				if !strings.Contains(objs.configMap(t).Data["models.config"], `base_path: "/models/0123abcd"`) {
					t.Errorf("model config does not serve the fetched generation:\n%s", objs.configMap(t).Data["models.config"])
				}
			},
		},
		{
			name: "pvc:// model is mounted, not created",
			ms: modelServer("resnet", func(ms *servingv1alpha1.ModelServer) {
				ms.Spec.Model.StorageURI = "pvc://shared-models/vision/resnet"
			}),
			in: values.Inputs{Served: fetched},
			check: func(t *testing.T, v *values.Values, objs *objects) {
				if len(objs.claims) != 0 {
					t.Errorf("a claim was rendered for a pvc:// model")
				}
				d := objs.deployment(t)
				if got := volume(t, d.Spec.Template.Spec, "model").PersistentVolumeClaim.ClaimName; got != "shared-models" {
					t.Errorf("serving model claim = %q, want shared-models", got)
				}
				j := objs.job(t)
				if got := volume(t, j.Spec.Template.Spec, "model").PersistentVolumeClaim; got.ClaimName != "shared-models" || !got.ReadOnly {
					t.Errorf("fetch model volume = %+v, want shared-models read-only", got)
				}
				if !mount(t, j.Spec.Template.Spec.Containers[0], "model").ReadOnly {
					t.Errorf("fetch pod mounts the user's claim read-write")
				}
				if !strings.Contains(objs.configMap(t).Data["models.config"], `base_path: "/models/vision/resnet"`) {
					t.Errorf("model config base path:\n%s", objs.configMap(t).Data["models.config"])
				}
			},
		},
		{
			name: "every podTemplate field, credentials, proxy env",
			ms:   full,
			in: values.Inputs{
				Served:   fetched,
				ProxyEnv: []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://proxy.example.com:3128"}, {Name: "NO_PROXY", Value: ".svc,.cluster.local"}},
			},
			check: func(t *testing.T, v *values.Values, objs *objects) {
				d := objs.deployment(t)
				c := d.Spec.Template.Spec.Containers[0]
				if got := len(c.Env); got != 6 {
					t.Errorf("serving env has %d variables, want 6 (3 from the spec, 2 proxy, the CPU limit)", got)
				}
				if got := c.Resources.Limits[corev1.ResourceName("nvidia.com/gpu")]; got.Cmp(resource.MustParse("1")) != 0 {
					t.Errorf("gpu limit = %s, want 1", got.String())
				}
				for _, ps := range []corev1.PodSpec{d.Spec.Template.Spec, objs.job(t).Spec.Template.Spec} {
					if ps.ServiceAccountName != "models-reader" {
						t.Errorf("serviceAccountName = %q, want models-reader", ps.ServiceAccountName)
					}
					if len(ps.Tolerations) != 2 || ps.Tolerations[1].TolerationSeconds == nil || *ps.Tolerations[1].TolerationSeconds != 300 {
						t.Errorf("tolerations = %+v", ps.Tolerations)
					}
				}
				j := objs.job(t)
				creds := volume(t, j.Spec.Template.Spec, "credentials")
				if creds.Secret == nil || creds.Secret.SecretName != "s3-credentials" || creds.Secret.DefaultMode == nil || *creds.Secret.DefaultMode != 0o440 {
					t.Errorf("credentials volume = %+v, want secret s3-credentials mode 0440", creds)
				}
				m := mount(t, j.Spec.Template.Spec.Containers[0], "credentials")
				if m.MountPath != values.CredentialsMountPath || !m.ReadOnly {
					t.Errorf("credentials mount = %+v", m)
				}
				if !slices.Contains(j.Spec.Template.Spec.Containers[0].Args, "--credentials-dir") {
					t.Errorf("fetch args %q lack --credentials-dir", j.Spec.Template.Spec.Containers[0].Args)
				}
				if j.Spec.Template.Labels["team"] != "vision" || j.Spec.Template.Annotations["example.com/owner"] != "vision@example.com" {
					t.Errorf("fetch pod lacks the podTemplate's labels or annotations: %v %v", j.Spec.Template.Labels, j.Spec.Template.Annotations)
				}
			},
		},
		{
			name: "specific versions and version labels",
			ms: modelServer("resnet", func(ms *servingv1alpha1.ModelServer) {
				ms.Spec.Model.VersionPolicy = &servingv1alpha1.VersionPolicy{Specific: &servingv1alpha1.SpecificVersions{Versions: []int64{1, 2}}}
				ms.Spec.Model.VersionLabels = map[string]int64{"stable": 1, "canary": 2}
			}),
			in: values.Inputs{Served: fetched},
			check: func(t *testing.T, v *values.Values, objs *objects) {
				cfg := objs.configMap(t).Data["models.config"]
				for _, want := range []string{"specific {", "versions: 1", "versions: 2", `key: "stable"`, `key: "canary"`, "value: 2"} {
					if !strings.Contains(cfg, want) {
						t.Errorf("model config lacks %q:\n%s", want, cfg)
					}
				}
			},
		},
		{
			name: "NodePort, custom ports and image, requests kept in their zone",
			ms: modelServer("resnet", func(ms *servingv1alpha1.ModelServer) {
				ms.Spec.Service.Type = corev1.ServiceTypeNodePort
				ms.Spec.Service.TrafficDistribution = corev1.ServiceTrafficDistributionPreferSameZone
				ms.Spec.Ports = servingv1alpha1.Ports{GRPC: 9000, REST: 65535}
				ms.Spec.Image = "registry.example.com/tensorflow/serving:2.19.1-gpu"
				ms.Spec.ImagePullPolicy = corev1.PullAlways
			}),
			in: values.Inputs{Served: fetched},
			check: func(t *testing.T, v *values.Values, objs *objects) {
				s := objs.service(t)
				if s.Spec.Type != corev1.ServiceTypeNodePort {
					t.Errorf("service type = %q, want NodePort", s.Spec.Type)
				}
				if s.Spec.Ports[0].Port != 9000 || s.Spec.Ports[1].Port != 65535 {
					t.Errorf("service ports = %+v", s.Spec.Ports)
				}
				c := objs.deployment(t).Spec.Template.Spec.Containers[0]
				if !slices.Contains(c.Args, "--port=9000") || !slices.Contains(c.Args, "--rest_api_port=65535") {
					t.Errorf("serving args = %q", c.Args)
				}
				if c.Image != "registry.example.com/tensorflow/serving:2.19.1-gpu" || c.ImagePullPolicy != corev1.PullAlways {
					t.Errorf("serving image = %q %q", c.Image, c.ImagePullPolicy)
				}
			},
		},
		{
			name: "storage class, size and access mode",
			ms: modelServer("resnet", func(ms *servingv1alpha1.ModelServer) {
				ms.Spec.Storage = servingv1alpha1.StorageSpec{
					Size:             ptr.To(resource.MustParse("50Gi")),
					StorageClassName: ptr.To("fast-ssd"),
					AccessMode:       corev1.ReadWriteMany,
				}
			}),
			check: func(t *testing.T, v *values.Values, objs *objects) {
				c := objs.claim(t)
				if c.Spec.StorageClassName == nil || *c.Spec.StorageClassName != "fast-ssd" {
					t.Errorf("claim storageClassName = %v, want fast-ssd", c.Spec.StorageClassName)
				}
				if got := c.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(resource.MustParse("50Gi")) != 0 {
					t.Errorf("claim size = %s, want 50Gi", got.String())
				}
				if !slices.Equal(c.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}) {
					t.Errorf("claim access modes = %v", c.Spec.AccessModes)
				}
			},
		},
		{
			name: "model name unlike the ModelServer's, all versions, LoadBalancer",
			ms: modelServer("image-classifier", func(ms *servingv1alpha1.ModelServer) {
				ms.Spec.Model.Name = "ResNet_v2.1-b"
				ms.Spec.Model.VersionPolicy = &servingv1alpha1.VersionPolicy{All: &servingv1alpha1.AllVersions{}}
				ms.Spec.Service.Type = corev1.ServiceTypeLoadBalancer
				// Characters YAML treats specially, which the CRD admits.
				ms.Spec.Model.StorageURI = "https://models.example.com/resnet.tar.gz?sig=a:b,[0]*!@%3D#sha256=" + strings.Repeat("ab", 32)
			}),
			in: values.Inputs{Served: fetched},
			check: func(t *testing.T, v *values.Values, objs *objects) {
				if got := objs.service(t).Spec.Type; got != corev1.ServiceTypeLoadBalancer {
					t.Errorf("service type = %q, want LoadBalancer", got)
				}
				if !strings.Contains(objs.configMap(t).Data["models.config"], `name: "ResNet_v2.1-b"`) {
					t.Errorf("model config:\n%s", objs.configMap(t).Data["models.config"])
				}
			},
		},
		{
			name: "a disruption budget of a percentage",
			ms: modelServer("resnet", func(ms *servingv1alpha1.ModelServer) {
				ms.Spec.Replicas = ptr.To[int32](8)
				ms.Spec.Disruption = &servingv1alpha1.Disruption{MaxUnavailable: ptr.To(intstr.FromString("25%"))}
			}),
			in: values.Inputs{Served: fetched},
			check: func(t *testing.T, v *values.Values, objs *objects) {
				if p := only(t, "PodDisruptionBudget", objs.pdbs); p.Spec.MaxUnavailable == nil || *p.Spec.MaxUnavailable != intstr.FromString("25%") {
					t.Errorf("pdb = %+v", p.Spec)
				}
			},
		},
		{
			name: "autoscaling with a behavior",
			ms: modelServer("resnet", func(ms *servingv1alpha1.ModelServer) {
				ms.Spec.Autoscaling = &servingv1alpha1.Autoscaling{
					MinReplicas: ptr.To[int32](2), MaxReplicas: 6,
					TargetCPUUtilizationPercentage: ptr.To[int32](70), TargetMemoryUtilizationPercentage: ptr.To[int32](80),
					Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](600)}},
				}
			}),
			in: values.Inputs{Served: fetched},
			check: func(t *testing.T, v *values.Values, objs *objects) {
				// The minimum: a switch from spec.replicas must not drop the
				// count to the Deployment's default of 1.
				if r := objs.deployment(t).Spec.Replicas; r == nil || *r != 2 {
					t.Errorf("deployment replicas = %v, want the autoscaler's minimum, 2", r)
				}
				h := only(t, "HorizontalPodAutoscaler", objs.hpas)
				if h.Spec.ScaleTargetRef != (autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: v.Names.Deployment}) {
					t.Errorf("hpa target = %+v", h.Spec.ScaleTargetRef)
				}
				if ptr.Deref(h.Spec.MinReplicas, 0) != 2 || h.Spec.MaxReplicas != 6 || len(h.Spec.Metrics) != 2 {
					t.Errorf("hpa = %+v", h.Spec)
				}
				if m := h.Spec.Metrics[0]; m.Resource == nil || m.Resource.Name != corev1.ResourceCPU || ptr.Deref(m.Resource.Target.AverageUtilization, 0) != 70 {
					t.Errorf("hpa cpu metric = %+v", m)
				}
				if h.Spec.Behavior == nil || ptr.Deref(h.Spec.Behavior.ScaleDown.StabilizationWindowSeconds, 0) != 600 {
					t.Errorf("hpa behavior = %+v", h.Spec.Behavior)
				}
				if p := only(t, "PodDisruptionBudget", objs.pdbs); p.Spec.MaxUnavailable == nil || p.Spec.MaxUnavailable.IntValue() != 1 {
					t.Errorf("pdb = %+v", p.Spec)
				}
			},
		},
		{
			name: "autoscaling with a failed first fetch holds the pods at zero",
			ms: modelServer("resnet", func(ms *servingv1alpha1.ModelServer) {
				ms.Spec.Autoscaling = &servingv1alpha1.Autoscaling{MaxReplicas: 3, TargetCPUUtilizationPercentage: ptr.To[int32](50)}
			}),
			in: values.Inputs{FailedFetches: map[string]bool{"resnet": true}},
			check: func(t *testing.T, v *values.Values, objs *objects) {
				if r := objs.deployment(t).Spec.Replicas; r == nil || *r != 0 {
					t.Errorf("deployment replicas = %v, want 0 after the only fetch failed", r)
				}
				if len(objs.hpas) != 0 {
					t.Error("an autoscaler was rendered with nothing to serve")
				}
				if len(objs.deployment(t).Spec.Template.Spec.InitContainers) != 0 {
					t.Error("the pods wait for a model whose fetch failed")
				}
			},
		},
		{
			name: "GPU, batching, priority, graceful shutdown",
			ms: modelServer("resnet", func(ms *servingv1alpha1.ModelServer) {
				ms.Spec.Resources.Limits = corev1.ResourceList{values.GPUResource: resource.MustParse("1")}
				ms.Spec.Batching = &servingv1alpha1.Batching{MaxBatchSize: 64, BatchTimeoutMicros: ptr.To[int64](2000), MaxEnqueuedBatches: 10, NumBatchThreads: ptr.To[int32](4), AllowedBatchSizes: []int32{16, 32, 64}}
				ms.Spec.PodTemplate.PriorityClassName = "serving-critical"
				ms.Spec.PodTemplate.RuntimeClassName = "nvidia"
				ms.Spec.PodTemplate.TerminationGracePeriodSeconds = ptr.To[int64](60)
				ms.Spec.PodTemplate.DrainSeconds = ptr.To[int64](15)
				ms.Spec.PodTemplate.LoadTimeoutSeconds = ptr.To[int64](1800)
				ms.Spec.ExtraArgs = []string{"--per_process_gpu_memory_fraction=0.8", "--grpc_channel_arguments=grpc.max_concurrent_streams=100"}
			}),
			in: values.Inputs{Served: fetched},
			check: func(t *testing.T, v *values.Values, objs *objects) {
				ps := objs.deployment(t).Spec.Template.Spec
				if img := ps.Containers[0].Image; img != servingv1alpha1.DefaultImage+"-gpu" {
					t.Errorf("image = %q, want the GPU variant", img)
				}
				if !slices.ContainsFunc(ps.Tolerations, func(tl corev1.Toleration) bool {
					return tl.Key == "nvidia.com/gpu" && tl.Effect == corev1.TaintEffectNoSchedule
				}) {
					t.Errorf("no toleration of the GPU taint: %+v", ps.Tolerations)
				}
				if jt := objs.jobs[0].Spec.Template.Spec.Tolerations; len(jt) != 0 {
					t.Errorf("the fetch pod tolerates %+v: it needs no GPU", jt)
				}
				args := strings.Join(ps.Containers[0].Args, " ")
				if !strings.Contains(args, "--enable_batching=true --batching_parameters_file=/etc/modelserver/batching.config") ||
					!strings.HasSuffix(args, " --per_process_gpu_memory_fraction=0.8 --grpc_channel_arguments=grpc.max_concurrent_streams=100") {
					t.Errorf("args %s", args)
				}
				want := "max_batch_size { value: 64 }\nbatch_timeout_micros { value: 2000 }\nmax_enqueued_batches { value: 10 }\nnum_batch_threads { value: 4 }\nallowed_batch_sizes: 16\nallowed_batch_sizes: 32\nallowed_batch_sizes: 64\n"
				if got := objs.configMap(t).Data["batching.config"]; got != want {
					t.Errorf("batching.config = %q, want %q", got, want)
				}
				if ps.PriorityClassName != "serving-critical" || ptr.Deref(ps.TerminationGracePeriodSeconds, 0) != 60 {
					t.Errorf("priority %q grace %v", ps.PriorityClassName, ps.TerminationGracePeriodSeconds)
				}
				if ptr.Deref(ps.RuntimeClassName, "") != "nvidia" {
					t.Errorf("runtime class %v, want nvidia", ps.RuntimeClassName)
				}
				if rc := objs.jobs[0].Spec.Template.Spec.RuntimeClassName; rc != nil {
					t.Errorf("the fetch pod runs with runtime class %q: it needs no GPU", *rc)
				}
				if l := ps.Containers[0].Lifecycle; l == nil || l.PreStop == nil || l.PreStop.Sleep == nil || l.PreStop.Sleep.Seconds != 15 {
					t.Errorf("preStop = %+v, want a 15s sleep", l)
				}
				if p := ps.Containers[0].StartupProbe; p == nil || p.FailureThreshold != 1800 {
					t.Errorf("startup probe = %+v, want 1800 checks for a 30-minute load", p)
				}
			},
		},
		{
			name: "monitoring with a ServiceMonitor, service annotations",
			ms: modelServer("resnet", func(ms *servingv1alpha1.ModelServer) {
				ms.Spec.Monitoring.ServiceMonitor = &servingv1alpha1.ServiceMonitorSpec{Interval: "15s", Labels: map[string]string{"release": "prometheus"}}
				ms.Spec.Service.Annotations = map[string]string{"service.beta.kubernetes.io/aws-load-balancer-internal": "true"}
			}),
			in: values.Inputs{Served: fetched, APIs: map[string]bool{values.APIKey(values.ServiceMonitorKind): true}},
			check: func(t *testing.T, v *values.Values, objs *objects) {
				a := objs.deployment(t).Spec.Template.Annotations
				if a["prometheus.io/scrape"] != "true" || a["prometheus.io/path"] != values.MonitoringPath || a["prometheus.io/port"] != "8501" {
					t.Errorf("scrape annotations = %v", a)
				}
				if got := objs.configMap(t).Data["monitoring.config"]; !strings.Contains(got, `path: "/monitoring/prometheus/metrics"`) || !strings.Contains(got, "enable: true") {
					t.Errorf("monitoring.config = %q", got)
				}
				sm := objs.custom["ServiceMonitor"]
				if len(sm) != 1 {
					t.Fatalf("%d ServiceMonitors", len(sm))
				}
				spec := sm[0]["spec"].(map[string]any)
				ep := spec["endpoints"].([]any)[0].(map[string]any)
				if ep["port"] != "http" || ep["path"] != values.MonitoringPath || ep["interval"] != "15s" {
					t.Errorf("ServiceMonitor endpoint = %v", ep)
				}
				if l := sm[0]["metadata"].(map[string]any)["labels"].(map[string]any); l["release"] != "prometheus" {
					t.Errorf("ServiceMonitor labels = %v", l)
				}
			},
		},
		{
			name: "a ServiceMonitor where the API is missing is left out with a warning",
			ms: modelServer("resnet", func(ms *servingv1alpha1.ModelServer) {
				ms.Spec.Monitoring.ServiceMonitor = &servingv1alpha1.ServiceMonitorSpec{}
				ms.Spec.Gateway = &servingv1alpha1.GatewaySpec{ParentRefs: []servingv1alpha1.GatewayParentRef{{Name: "gw"}}}
			}),
			in: values.Inputs{Served: fetched},
			check: func(t *testing.T, v *values.Values, objs *objects) {
				if len(objs.custom) != 0 || len(v.Warnings) != 3 {
					t.Errorf("custom objects %v, warnings %q", objs.custom, v.Warnings)
				}
			},
		},
		{
			name: "ingress, gateway routes and a network policy",
			ms: modelServer("resnet", func(ms *servingv1alpha1.ModelServer) {
				ms.Spec.Ingress = &servingv1alpha1.IngressSpec{Host: "resnet.models.example.com", ClassName: "nginx", TLSSecretName: "models-tls"}
				ms.Spec.Gateway = &servingv1alpha1.GatewaySpec{ParentRefs: []servingv1alpha1.GatewayParentRef{{Name: "gw", Namespace: "infra"}}, Hostnames: []string{"models.example.com"},
					RequestTimeout: &metav1.Duration{Duration: 90 * time.Second}}
				ms.Spec.NetworkPolicy = &servingv1alpha1.NetworkPolicySpec{AllowedNamespaces: []string{"clients", "ml"}}
			}),
			in: values.Inputs{Served: fetched, APIs: map[string]bool{values.APIKey(values.HTTPRouteKind): true, values.APIKey(values.GRPCRouteKind): true}},
			check: func(t *testing.T, v *values.Values, objs *objects) {
				ing := only(t, "Ingress", objs.ingresses)
				if ptr.Deref(ing.Spec.IngressClassName, "") != "nginx" || ing.Spec.Rules[0].Host != "resnet.models.example.com" ||
					ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Port.Name != "http" || ing.Spec.TLS[0].SecretName != "models-tls" {
					t.Errorf("ingress = %+v", ing.Spec)
				}
				// The REST API alone: TF Serving's metrics, on the same
				// port, stay in the cluster.
				if paths := ing.Spec.Rules[0].HTTP.Paths; len(paths) != 1 || paths[0].Path != "/v1" || ptr.Deref(paths[0].PathType, "") != networkingv1.PathTypePrefix {
					t.Errorf("ingress paths = %+v, want the prefix /v1 alone", paths)
				}
				httpRule := objs.custom["HTTPRoute"][0]["spec"].(map[string]any)["rules"].([]any)[0].(map[string]any)
				want := "[map[path:map[type:PathPrefix value:/v1/models/resnet]] map[path:map[type:Exact value:/v1/models/resnet:predict]] " +
					"map[path:map[type:Exact value:/v1/models/resnet:classify]] map[path:map[type:Exact value:/v1/models/resnet:regress]]]"
				if m := fmt.Sprint(httpRule["matches"]); m != want {
					t.Errorf("HTTPRoute matches = %s, want the model's REST API alone, %s", m, want)
				}
				if got := fmt.Sprint(httpRule["timeouts"]); got != "map[request:1m30s]" {
					t.Errorf("HTTPRoute timeouts = %s, want spec.gateway.requestTimeout's as the request's", got)
				}
				if grpcRule := objs.custom["GRPCRoute"][0]["spec"].(map[string]any)["rules"].([]any)[0].(map[string]any); grpcRule["matches"] != nil {
					t.Errorf("GRPCRoute matches = %v, want every method (the gRPC port serves nothing else)", grpcRule["matches"])
				}
				for kind, port := range map[string]float64{"HTTPRoute": 8501, "GRPCRoute": 8500} {
					r := objs.custom[kind]
					if len(r) != 1 {
						t.Fatalf("%d %s", len(r), kind)
					}
					spec := r[0]["spec"].(map[string]any)
					backend := spec["rules"].([]any)[0].(map[string]any)["backendRefs"].([]any)[0].(map[string]any)
					if backend["name"] != v.Names.Service || backend["port"] != port {
						t.Errorf("%s backend = %v", kind, backend)
					}
					if parent := spec["parentRefs"].([]any)[0].(map[string]any); parent["name"] != "gw" || parent["namespace"] != "infra" {
						t.Errorf("%s parent = %v", kind, parent)
					}
				}
				np := only(t, "NetworkPolicy", objs.netpols)
				if got := np.Spec.Ingress[0].From[0].NamespaceSelector.MatchExpressions[0].Values; !slices.Equal(got, []string{"clients", "ml"}) {
					t.Errorf("network policy namespaces = %q", got)
				}
				if !maps.Equal(np.Spec.PodSelector.MatchLabels, v.Labels.Selector) || len(np.Spec.Ingress[0].Ports) != 2 {
					t.Errorf("network policy = %+v", np.Spec)
				}
			},
		},
		{
			name: "several models in one server, one not fetched yet",
			ms: func() *servingv1alpha1.ModelServer {
				ms := modelServer("zoo", nil)
				ms.Spec.Model = nil
				ms.Spec.Models = []servingv1alpha1.ModelSpec{
					{Name: "resnet", StorageURI: "s3://models/resnet", VersionLabels: map[string]int64{"stable": 1}},
					{Name: "bert", StorageURI: "gs://models/bert", CredentialsSecret: "gcs"},
					{Name: "resnet-copy", StorageURI: "s3://models/resnet"},
				}
				return ms
			}(),
			in: values.Inputs{Served: map[string]string{"resnet": "0123abcd", "resnet-copy": "0123abcd"}},
			check: func(t *testing.T, v *values.Values, objs *objects) {
				if len(objs.jobs) != 2 {
					t.Errorf("%d fetch Jobs, want 2 (the two resnets share one)", len(objs.jobs))
				}
				config := objs.configMap(t).Data["models.config"]
				if strings.Count(config, "config {") != 2 || strings.Contains(config, `"bert"`) {
					t.Errorf("model config should list the two fetched models only:\n%s", config)
				}
				if r := objs.deployment(t).Spec.Replicas; r == nil || *r != 1 {
					t.Errorf("replicas = %v: a model with data is served while another is fetched", r)
				}
				if objs.jobs[1].Spec.Template.Spec.Volumes[2].Secret.SecretName != "gcs" {
					t.Errorf("bert's fetch lacks its credentials")
				}
			},
		},
		{
			name: "sixteen models through a Gateway: each one's REST API, in one rule",
			ms: func() *servingv1alpha1.ModelServer {
				ms := modelServer("zoo", nil)
				ms.Spec.Model = nil
				for i := range 16 {
					ms.Spec.Models = append(ms.Spec.Models, servingv1alpha1.ModelSpec{Name: fmt.Sprintf("m%02d", i), StorageURI: "s3://models/resnet"})
				}
				ms.Spec.Gateway = &servingv1alpha1.GatewaySpec{ParentRefs: []servingv1alpha1.GatewayParentRef{{Name: "gw"}}, GRPC: ptr.To(false)}
				return ms
			}(),
			in: values.Inputs{Served: fetched, APIs: gatewayAPIs(false)},
			check: func(t *testing.T, v *values.Values, objs *objects) {
				rules := objs.custom["HTTPRoute"][0]["spec"].(map[string]any)["rules"].([]any)
				matches := rules[0].(map[string]any)["matches"].([]any)
				if len(rules) != 1 || len(matches) != 64 {
					t.Fatalf("%d rules, %d matches; want 1 rule of 64 (the Gateway API's most)", len(rules), len(matches))
				}
				if last := fmt.Sprint(matches[63]); last != "map[path:map[type:Exact value:/v1/models/m15:regress]]" {
					t.Errorf("the last match is %s", last)
				}
			},
		},
		{
			name: "an oci:// model's fetch reads the pods' image pull secrets",
			ms: func() *servingv1alpha1.ModelServer {
				ms := modelServer("zoo", nil)
				ms.Spec.Model = nil
				ms.Spec.Models = []servingv1alpha1.ModelSpec{
					{Name: "resnet", StorageURI: "oci://registry.example.com/models/resnet:v1", CredentialsSecret: "registry-ca"},
					{Name: "bert", StorageURI: "s3://models/bert"},
				}
				ms.Spec.PodTemplate.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}, {Name: "mirror.example.com"}}
				return ms
			}(),
			check: func(t *testing.T, v *values.Values, objs *objects) {
				pulls := volume(t, objs.jobs[0].Spec.Template.Spec, "pull-secrets")
				if pulls.Projected == nil || len(pulls.Projected.Sources) != 2 {
					t.Errorf("the oci:// model's fetch volume %+v, want a projection of the two pull secrets", pulls)
				}
				for _, vol := range objs.jobs[1].Spec.Template.Spec.Volumes {
					if vol.Name == "pull-secrets" {
						t.Errorf("the s3:// model's fetch mounts the pull secrets")
					}
				}
			},
		},
		{
			name: "an s3:// or gs:// model's fetch reads it with a token of the pods' service account",
			ms: func() *servingv1alpha1.ModelServer {
				ms := modelServer("zoo", nil)
				ms.Spec.Model = nil
				ms.Spec.Models = []servingv1alpha1.ModelSpec{
					{Name: "resnet", StorageURI: "s3://models/resnet", CredentialsSecret: "region",
						WebIdentity: &servingv1alpha1.WebIdentity{RoleARN: "arn:aws:iam::123456789012:role/model-reader"}},
					{Name: "bert", StorageURI: "s3://models/bert", WebIdentity: &servingv1alpha1.WebIdentity{RoleARN: "arn:minio:iam:::role/reader", Audience: "minio"}},
					{Name: "gpt", StorageURI: "s3://models/gpt"},
					{Name: "t5", StorageURI: "gs://models/t5", WebIdentity: &servingv1alpha1.WebIdentity{
						Provider: "projects/1/locations/global/workloadIdentityPools/clusters/providers/ml", ServiceAccount: "reader@ml.iam.gserviceaccount.com"}},
				}
				ms.Spec.PodTemplate.ServiceAccountName = "model-reader"
				return ms
			}(),
			check: func(t *testing.T, v *values.Values, objs *objects) {
				for i, want := range []string{values.DefaultWebIdentityAudience, "minio", "", "https://iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/clusters/providers/ml"} {
					spec := objs.jobs[i].Spec.Template.Spec
					token := slices.IndexFunc(spec.Volumes, func(vol corev1.Volume) bool { return vol.Name == "web-identity" })
					switch {
					case want == "" && token >= 0:
						t.Errorf("Job %d, without webIdentity, projects a token", i)
					case want != "" && (token < 0 || spec.Volumes[token].Projected.Sources[0].ServiceAccountToken.Audience != want):
						t.Errorf("Job %d volumes %+v, want a token for %s", i, spec.Volumes, want)
					case spec.ServiceAccountName != "model-reader":
						t.Errorf("Job %d runs as %q, not the pods' service account", i, spec.ServiceAccountName)
					}
				}
				if args := objs.jobs[0].Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "arn:aws:iam::123456789012:role/model-reader") ||
					!slices.Contains(args, "modelserver-ml-zoo") {
					t.Errorf("fetch args %q, want the role and the session name", args)
				}
			},
		},
		{
			name: "ReadWriteMany spreads the pods over nodes",
			ms: modelServer("resnet", func(ms *servingv1alpha1.ModelServer) {
				ms.Spec.Storage.AccessMode = corev1.ReadWriteMany
				ms.Spec.Replicas = ptr.To[int32](3)
			}),
			in: values.Inputs{Served: fetched},
			check: func(t *testing.T, v *values.Values, objs *objects) {
				tsc := objs.deployment(t).Spec.Template.Spec.TopologySpreadConstraints
				if len(tsc) != 2 || tsc[1].TopologyKey != corev1.LabelHostname || tsc[1].WhenUnsatisfiable != corev1.ScheduleAnyway {
					t.Errorf("topology spread = %+v", tsc)
				}
			},
		},
		{
			name: "PerPod: no claim, each pod fetches its own copy, pinned, and the pods spread over nodes",
			ms: modelServer("resnet", func(ms *servingv1alpha1.ModelServer) {
				ms.Spec.Storage.Mode = servingv1alpha1.StoragePerPod
				ms.Spec.Storage.Size = ptr.To(resource.MustParse("2Gi"))
				ms.Spec.Model.CredentialsSecret = "s3-creds"
				ms.Spec.Model.WebIdentity = &servingv1alpha1.WebIdentity{RoleARN: "arn:aws:iam::123456789012:role/model-reader"}
				ms.Spec.Replicas = ptr.To[int32](3)
			}),
			in: values.Inputs{Served: fetched, Pins: map[string]values.Pin{"0123abcd": {Digest: "sha256:feed"}, "99999999": {Digest: "sha256:old"}}},
			check: func(t *testing.T, v *values.Values, objs *objects) {
				if len(objs.claims) > 0 {
					t.Error("a claim is rendered in storage mode PerPod")
				}
				ps := objs.deployment(t).Spec.Template.Spec
				if dir := volume(t, ps, "model").EmptyDir; dir == nil || dir.SizeLimit.String() != "2Gi" {
					t.Errorf("serving pods' model volume %+v, want an emptyDir of 2Gi", volume(t, ps, "model"))
				}
				if dir := volume(t, objs.jobs[0].Spec.Template.Spec, "model").EmptyDir; dir == nil {
					t.Errorf("the fetch Job's model volume is not its own")
				}
				ic := ps.InitContainers
				if len(ic) != 1 || ic[0].Name != "fetch-model" || !slices.Contains(ic[0].Args, "arn:aws:iam::123456789012:role/model-reader") ||
					!slices.Contains(ic[0].Args, values.CredentialsMountPath) || ic[0].TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
					t.Fatalf("init containers %+v, want fetch-model fetching as the Job does", ic)
				}
				if !equality.Semantic.DeepEqual(ic[0].Resources, v.Fetches[0].Resources) {
					t.Errorf("fetch-model resources %+v, want the fetch Job's %+v", ic[0].Resources, v.Fetches[0].Resources)
				}
				if s := volume(t, ps, "fetch-model-credentials").Secret; s == nil || s.SecretName != "s3-creds" {
					t.Errorf("credentials volume %+v", volume(t, ps, "fetch-model-credentials"))
				}
				if tok := volume(t, ps, "fetch-model-web-identity").Projected; tok == nil || tok.Sources[0].ServiceAccountToken.Audience != values.DefaultWebIdentityAudience {
					t.Errorf("token volume %+v", volume(t, ps, "fetch-model-web-identity"))
				}
				if got := objs.configMap(t).Data[values.PinsFile]; got != `{"0123abcd":{"digest":"sha256:feed"}}`+"\n" {
					t.Errorf("pins %s, want the served generation's alone", got)
				}
				// The fetch reads its settings where the ConfigMap is mounted.
				if got := objs.configMap(t).Data[values.PodFetchSettingsFile]; got != `{"timeout":"1h0m0s"}`+"\n" ||
					!slices.Contains(ic[0].Args, values.ConfigMountPath+"/"+values.PodFetchSettingsFile) ||
					!slices.ContainsFunc(ic[0].VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "config" && m.MountPath == values.ConfigMountPath }) {
					t.Errorf("settings %q, fetch-model args %q mounts %+v: want the settings file read from the config volume", got, ic[0].Args, ic[0].VolumeMounts)
				}
				tsc := ps.TopologySpreadConstraints
				if len(tsc) != 2 || tsc[1].TopologyKey != corev1.LabelHostname {
					t.Errorf("topology spread = %+v, want zones and nodes", tsc)
				}
			},
		},
		{
			name: "PerPod with a storage class: an ephemeral claim per pod",
			ms: modelServer("zoo", func(ms *servingv1alpha1.ModelServer) {
				ms.Spec.Storage.Mode = servingv1alpha1.StoragePerPod
				ms.Spec.Storage.StorageClassName = ptr.To("local-nvme")
				ms.Spec.Model = nil
				ms.Spec.Models = []servingv1alpha1.ModelSpec{
					{Name: "resnet", StorageURI: "oci://registry.example.com/models/resnet:v1"},
					{Name: "bert", StorageURI: "gs://models/bert", CredentialsSecret: "gcs"},
				}
				ms.Spec.PodTemplate.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
			}),
			in: values.Inputs{Served: map[string]string{"resnet": "aaaa1111", "bert": "bbbb2222"}},
			check: func(t *testing.T, v *values.Values, objs *objects) {
				ps := objs.deployment(t).Spec.Template.Spec
				eph := volume(t, ps, "model").Ephemeral
				if eph == nil || ptr.Deref(eph.VolumeClaimTemplate.Spec.StorageClassName, "") != "local-nvme" {
					t.Errorf("serving pods' model volume %+v, want an ephemeral claim of local-nvme", volume(t, ps, "model"))
				}
				if len(ps.InitContainers) != 2 || ps.InitContainers[1].Name != "fetch-model-1" {
					t.Fatalf("init containers %+v, want one per model", ps.InitContainers)
				}
				if p := volume(t, ps, "fetch-model-pull-secrets").Projected; p == nil || p.Sources[0].Secret.Name != "regcred" {
					t.Errorf("pull secrets %+v", volume(t, ps, "fetch-model-pull-secrets"))
				}
				if s := volume(t, ps, "fetch-model-1-credentials").Secret; s == nil || s.SecretName != "gcs" {
					t.Errorf("the second model's credentials %+v", volume(t, ps, "fetch-model-1-credentials"))
				}
			},
		},
		{
			name: "gRPC over TLS with client certificates",
			ms: modelServer("resnet", func(ms *servingv1alpha1.ModelServer) {
				ms.Spec.TLS = &servingv1alpha1.TLSSpec{SecretName: "resnet-grpc", ClientAuth: servingv1alpha1.TLSClientAuthRequire}
			}),
			in: values.Inputs{FetchImage: "example.com/operator:1", TLSCertDigest: "d1"},
			check: func(t *testing.T, v *values.Values, objs *objects) {
				ic := objs.deployment(t).Spec.Template.Spec.InitContainers[0]
				if ic.Name != values.TLSConfigContainerName || !slices.Contains(ic.Args, "--require-client-cert") || !slices.Contains(ic.Args, values.TLSSecretMountPath+"/ca.crt") {
					t.Errorf("first init container %s %q, want tls-config asking clients for certificates signed by ca.crt", ic.Name, ic.Args)
				}
				if want := "over TLS with the certificate of Secret resnet-grpc; clients present a certificate signed by its ca.crt"; !strings.Contains(objs.notes, want) {
					t.Errorf("NOTES.txt does not say %q:\n%s", want, objs.notes)
				}
			},
		},
		{
			name: "gRPC over TLS with client certificates of a CA bundle's ConfigMap",
			ms: modelServer("resnet", func(ms *servingv1alpha1.ModelServer) {
				ms.Spec.TLS = &servingv1alpha1.TLSSpec{SecretName: "resnet-grpc", ClientAuth: servingv1alpha1.TLSClientAuthRequire,
					ClientCA: &servingv1alpha1.TLSClientCA{ConfigMapName: "partners", Key: "bundle.pem"}}
			}),
			in: values.Inputs{FetchImage: "example.com/operator:1", TLSCertDigest: "d1"},
			check: func(t *testing.T, v *values.Values, objs *objects) {
				ps := objs.deployment(t).Spec.Template.Spec
				ca := volume(t, ps, values.TLSClientCAVolumeName).ConfigMap
				if ca == nil || ca.Name != "partners" || len(ca.Items) != 1 || ca.Items[0].Key != "bundle.pem" || ca.Items[0].Path != "ca.crt" {
					t.Errorf("client CA volume %+v, want ConfigMap partners's bundle.pem as ca.crt", ca)
				}
				ic := ps.InitContainers[0]
				if !slices.ContainsFunc(ic.VolumeMounts, func(m corev1.VolumeMount) bool {
					return m.Name == values.TLSClientCAVolumeName && m.MountPath == values.TLSClientCAMountPath && m.ReadOnly
				}) || !slices.Contains(ic.Args, values.TLSClientCAMountPath+"/ca.crt") {
					t.Errorf("tls-config mounts %+v, args %q: want the client CA at %s, read from there", ic.VolumeMounts, ic.Args, values.TLSClientCAMountPath)
				}
				if slices.ContainsFunc(ps.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == values.TLSClientCAVolumeName }) {
					t.Error("the serving container mounts the client CA: only tls-config reads it")
				}
				if want := "clients present a certificate signed by a CA in ConfigMap partners's bundle.pem"; !strings.Contains(objs.notes, want) {
					t.Errorf("NOTES.txt does not say %q:\n%s", want, objs.notes)
				}
			},
		},
		{
			name: "gRPC over TLS with client certificates of a CA Issuer's Secret",
			ms: modelServer("resnet", func(ms *servingv1alpha1.ModelServer) {
				ms.Spec.TLS = &servingv1alpha1.TLSSpec{SecretName: "resnet-grpc", ClientAuth: servingv1alpha1.TLSClientAuthRequire,
					ClientCA: &servingv1alpha1.TLSClientCA{SecretName: "clients-ca"}}
			}),
			in: values.Inputs{FetchImage: "example.com/operator:1", TLSCertDigest: "d1"},
			check: func(t *testing.T, v *values.Values, objs *objects) {
				ca := volume(t, objs.deployment(t).Spec.Template.Spec, values.TLSClientCAVolumeName).Secret
				if ca == nil || ca.SecretName != "clients-ca" || len(ca.Items) != 1 || ca.Items[0].Key != "ca.crt" || ca.Items[0].Path != "ca.crt" {
					t.Errorf("client CA volume %+v, want Secret clients-ca's ca.crt", ca)
				}
				if want := "clients present a certificate signed by a CA in Secret clients-ca's ca.crt"; !strings.Contains(objs.notes, want) {
					t.Errorf("NOTES.txt does not say %q:\n%s", want, objs.notes)
				}
			},
		},
		{
			name: "gRPC over TLS through a Gateway: a BackendTLSPolicy and its CA",
			ms:   tlsThroughGateway(nil),
			in:   tlsInputs(true, &values.GatewayTrust{Hostname: "resnet.default.svc", CA: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"}),
			check: func(t *testing.T, v *values.Values, objs *objects) {
				svc := objs.service(t)
				spec := backendTLSPolicy(t, objs)
				target := spec["targetRefs"].([]any)[0].(map[string]any)
				grpcPort := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == target["sectionName"] })
				if target["group"] != "" || target["kind"] != "Service" || target["name"] != svc.Name || grpcPort < 0 || svc.Spec.Ports[grpcPort].Port != 8500 {
					t.Errorf("targetRefs = %v, want the Service's gRPC port (ports %+v)", spec["targetRefs"], svc.Spec.Ports)
				}
				validation := spec["validation"].(map[string]any)
				ref := validation["caCertificateRefs"].([]any)[0].(map[string]any)
				ca := only(t, "CA ConfigMap", objs.caConfigMaps)
				if validation["hostname"] != "resnet.default.svc" || validation["wellKnownCACertificates"] != nil ||
					ref["group"] != "" || ref["kind"] != "ConfigMap" || ref["name"] != ca.Name || ca.Name == objs.configMap(t).Name {
					t.Errorf("validation = %v, CA ConfigMap %s", validation, ca.Name)
				}
				if ca.Data["ca.crt"] != v.BackendTLS.CA || len(ca.Data) != 1 {
					t.Errorf("CA ConfigMap data = %q, want ca.crt alone", ca.Data)
				}
			},
		},
		{
			name: "gRPC over TLS through a Gateway, of a CA the Gateways know",
			ms:   tlsThroughGateway(nil),
			in:   tlsInputs(true, &values.GatewayTrust{Hostname: "grpc.example.com"}),
			check: func(t *testing.T, v *values.Values, objs *objects) {
				validation := backendTLSPolicy(t, objs)["validation"].(map[string]any)
				if validation["hostname"] != "grpc.example.com" || validation["wellKnownCACertificates"] != "System" || validation["caCertificateRefs"] != nil {
					t.Errorf("validation = %v, want the system's CAs", validation)
				}
				if len(objs.caConfigMaps) != 0 {
					t.Errorf("CA ConfigMaps %+v, want none", objs.caConfigMaps)
				}
			},
		},
		{
			name: "gRPC over TLS through a Gateway without the BackendTLSPolicy API, or a certificate a Gateway cannot check",
			ms:   tlsThroughGateway(nil),
			in:   tlsInputs(false, &values.GatewayTrust{Hostname: "resnet.default.svc"}),
			check: func(t *testing.T, v *values.Values, objs *objects) {
				if len(v.Warnings) != 1 || !strings.Contains(v.Warnings[0], "no gateway.networking.k8s.io/v1/BackendTLSPolicy API") || !v.WaitsForAPIs {
					t.Errorf("warnings %q (waits for APIs: %v), want the missing API named and looked for again", v.Warnings, v.WaitsForAPIs)
				}
				// The routes stay: a policy of the user's own may serve.
				if len(objs.custom["GRPCRoute"]) != 1 {
					t.Errorf("GRPCRoutes %d, want 1", len(objs.custom["GRPCRoute"]))
				}
				unchecked := tlsInputs(true, &values.GatewayTrust{Problem: "Secret \"resnet-grpc\": its certificate names no DNS name"})
				v = valuesFor(t, tlsThroughGateway(nil), unchecked)
				if v.BackendTLS != nil || len(v.Warnings) != 1 || !strings.Contains(v.Warnings[0], "no BackendTLSPolicy rendered for the gRPC port, which serves TLS (spec.tls): Secret \"resnet-grpc\": its certificate names no DNS name") {
					t.Errorf("backendTLS %+v, warnings %q", v.BackendTLS, v.Warnings)
				}
			},
		},
		{
			name: "gRPC over TLS, the REST API alone through a Gateway: no BackendTLSPolicy",
			ms:   tlsThroughGateway(func(g *servingv1alpha1.GatewaySpec) { g.GRPC = ptr.To(false) }),
			in:   tlsInputs(true, &values.GatewayTrust{Hostname: "resnet.default.svc"}),
			check: func(t *testing.T, v *values.Values, objs *objects) {
				if v.BackendTLS != nil || len(v.Warnings) != 0 {
					t.Errorf("backendTLS %+v, warnings %q", v.BackendTLS, v.Warnings)
				}
			},
		},
		{
			name: "rollout in place, for a GPU pool with no room for one more pod",
			ms: modelServer("resnet", func(ms *servingv1alpha1.ModelServer) {
				ms.Spec.Replicas = ptr.To[int32](4)
				ms.Spec.Rollout = &servingv1alpha1.Rollout{MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromInt32(1))}
			}),
			check: func(t *testing.T, v *values.Values, objs *objects) {
				if len(v.Warnings) != 0 {
					t.Errorf("warnings %q: one of four pods down at a time leaves the endpoint up", v.Warnings)
				}
			},
		},
		{
			name: "rollout by percentages",
			ms: modelServer("resnet", func(ms *servingv1alpha1.ModelServer) {
				ms.Spec.Replicas = ptr.To[int32](20)
				ms.Spec.Rollout = &servingv1alpha1.Rollout{MaxSurge: ptr.To(intstr.FromString("25%")), MaxUnavailable: ptr.To(intstr.FromString("10%"))}
			}),
		},
		{
			name: "longest ModelServer name",
			ms:   modelServer("m"+strings.Repeat("x", servingv1alpha1.MaxNameLength-2)+"9", nil),
			check: func(t *testing.T, v *values.Values, objs *objects) {
				for _, n := range []string{v.Names.Deployment, v.Names.Service, v.Names.ConfigMap, v.Names.Claim, v.Fetches[0].Name} {
					if len(n) > 63 {
						t.Errorf("name %q is longer than 63 characters", n)
					}
				}
			},
		},
	}
}

// TestRenderModelServers renders a matrix of ModelServers through
// values.For and the embedded chart, decodes every object strictly into its
// API type and checks what every stack must have.
func TestRenderModelServers(t *testing.T) {
	for _, tc := range renderCases() {
		t.Run(tc.name, func(t *testing.T) {
			v := valuesFor(t, tc.ms, tc.in)
			objs := renderValues(t, v)
			checkStack(t, tc.ms, v, objs)
			if tc.check != nil {
				tc.check(t, v, objs)
			}
		})
	}
}

// TestPodsMadeBeforeTheFetcherRenderAsTheyRun: a fetch Job or serving pod
// made by an operator whose image had no fetcher runs the image's
// entrypoint, and must render with no command, as it was made.
func TestPodsMadeBeforeTheFetcherRenderAsTheyRun(t *testing.T) {
	v := valuesFor(t, modelServer("resnet", nil), values.Inputs{})
	if v.Serving.ModelWait == nil || len(v.Fetches) != 1 {
		t.Fatalf("want a fetch and a wait-for-model, got %+v and %+v", v.Fetches, v.Serving.ModelWait)
	}
	if len(v.Fetches[0].Command) == 0 || len(v.Serving.ModelWait.Command) == 0 {
		t.Fatalf("new pods run no fetcher: %q, %q", v.Fetches[0].Command, v.Serving.ModelWait.Command)
	}
	v.Fetches[0].Command, v.Serving.ModelWait.Command = nil, nil
	objs := renderValues(t, v)
	checkStack(t, modelServer("resnet", nil), v, objs)
}

// TestOnlyStartupSettingsRollPods: the serving pods carry a checksum of what
// TF Serving reads only at start, so a change to it makes a new ReplicaSet;
// a version policy or label is polled from the model config, and must leave
// the pods alone.
func TestOnlyStartupSettingsRollPods(t *testing.T) {
	in := values.Inputs{Served: fetched}
	render := func(mutate func(*servingv1alpha1.ModelServer)) (string, string) {
		t.Helper()
		objs := renderValues(t, valuesFor(t, modelServer("resnet", mutate), in))
		return objs.deployment(t).Spec.Template.Annotations["checksum/config"], objs.configMap(t).Data[values.ModelConfigFile]
	}
	base, baseConfig := render(nil)
	if base == "" {
		t.Fatal("no checksum/config annotation on the serving pods")
	}
	if again, _ := render(nil); again != base {
		t.Errorf("checksum changed between two renders of the same spec: %s, %s", base, again)
	}
	polled := map[string]func(*servingv1alpha1.ModelServer){
		"replicas": func(ms *servingv1alpha1.ModelServer) { ms.Spec.Replicas = ptr.To[int32](5) },
		"version policy": func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.VersionPolicy = &servingv1alpha1.VersionPolicy{Latest: &servingv1alpha1.LatestVersions{NumVersions: 2}}
		},
		"version labels": func(ms *servingv1alpha1.ModelServer) { ms.Spec.Model.VersionLabels = map[string]int64{"stable": 1} },
	}
	for name, mutate := range polled {
		if got, config := render(mutate); got != base {
			t.Errorf("changing the %s rolled the pods (checksum %s, was %s)", name, got, base)
		} else if name != "replicas" && config == baseConfig {
			t.Errorf("changing the %s left the model config as it was", name)
		}
	}
	restart := map[string]func(*servingv1alpha1.ModelServer){
		"model name": func(ms *servingv1alpha1.ModelServer) { ms.Spec.Model.Name = "other" },
		"batching":   func(ms *servingv1alpha1.ModelServer) { ms.Spec.Batching = &servingv1alpha1.Batching{MaxBatchSize: 8} },
		"monitoring": func(ms *servingv1alpha1.ModelServer) { ms.Spec.Monitoring.Enabled = ptr.To(false) },
		"ports":      func(ms *servingv1alpha1.ModelServer) { ms.Spec.Ports = servingv1alpha1.Ports{GRPC: 9000, REST: 9001} },
		"extra args": func(ms *servingv1alpha1.ModelServer) { ms.Spec.ExtraArgs = []string{"--enable_model_warmup=false"} },
	}
	for name, mutate := range restart {
		if got, _ := render(mutate); got == base {
			t.Errorf("changing the %s left the checksum at %s: the pods would not see it", name, base)
		}
	}
	in.Served = map[string]string{"resnet": "4567cdef"}
	if got := renderValues(t, valuesFor(t, modelServer("resnet", nil), in)).deployment(t).Spec.Template.Annotations["checksum/config"]; got == base {
		t.Error("a newly fetched generation left the checksum as it was: the pods would keep the old model")
	}
}

// TestChartRendersWithItsDefaults: `helm template` of the chart with its
// own values.yaml gives a complete, valid stack, and values.yaml has exactly
// the shape of values.Values.
func TestChartRendersWithItsDefaults(t *testing.T) {
	c, err := helmcharts.ModelServer()
	if err != nil {
		t.Fatal(err)
	}
	v := strictValues(t, c.Values)

	rendered, err := helmcharts.Render(nil, "resnet", namespace)
	if err != nil {
		t.Fatalf("render with the chart's defaults: %v", err)
	}
	objs := decodeAll(t, rendered)
	ms := modelServer("resnet", nil)
	checkStack(t, ms, v, objs)
	if v.Fetches[0].Name != "resnet-fetch-00000000" || v.Models[0].StorageURI != "s3://models/resnet" || objs.deployment(t).Name != "resnet" {
		t.Errorf("unexpected sample: %+v", v)
	}
	if notes := rendered[helmcharts.ChartName+"/templates/NOTES.txt"]; !strings.Contains(notes, "/v1/models/resnet") {
		t.Errorf("NOTES.txt does not name the REST endpoint:\n%s", notes)
	}
}

// TestChartLints runs Helm's linter (what `helm lint` does) on the chart's
// directory.
func TestChartLints(t *testing.T) {
	kube, err := chartutil.ParseKubeVersion("v1.37.0")
	if err != nil {
		t.Fatal(err)
	}
	linter := lint.AllWithKubeVersion(helmcharts.ChartName, nil, namespace, kube)
	for _, m := range linter.Messages {
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint: %s", m)
		} else {
			t.Logf("helm lint: %s", m)
		}
	}
}

// TestEmbeddedChartIsTheDirectory: the embedded chart holds exactly the
// files of helm-charts/modelserver, so what `helm template` renders from
// the directory is what the operator installs.
func TestEmbeddedChartIsTheDirectory(t *testing.T) {
	c, err := helmcharts.ModelServer()
	if err != nil {
		t.Fatal(err)
	}
	var onDisk []string
	err = filepath.WalkDir(helmcharts.ChartName, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(helmcharts.ChartName, p)
		onDisk = append(onDisk, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var embedded []string
	for _, f := range c.Raw {
		embedded = append(embedded, f.Name)
	}
	sort.Strings(onDisk)
	sort.Strings(embedded)
	if !slices.Equal(onDisk, embedded) {
		t.Errorf("embedded files %q, directory holds %q", embedded, onDisk)
	}
	if !slices.Contains(embedded, "templates/_helpers.tpl") {
		t.Errorf("templates/_helpers.tpl is not embedded")
	}

	md := c.Metadata
	if md.Name != "modelserver" || md.APIVersion != "v2" || md.Version != chartVersion || md.Type != "application" {
		t.Errorf("Chart.yaml: %+v", md)
	}
	if want := "tensorflow/serving:" + md.AppVersion; want != servingv1alpha1.DefaultImage {
		t.Errorf("Chart.yaml appVersion %q does not match the default image %q", md.AppVersion, servingv1alpha1.DefaultImage)
	}
	if !chartutil.IsCompatibleRange(md.KubeVersion, "v1.30.0") || chartutil.IsCompatibleRange(md.KubeVersion, "v1.29.9") {
		t.Errorf("Chart.yaml kubeVersion %q, want >=1.30", md.KubeVersion)
	}
}

// TestModelServerReturnsCopies: Helm's actions write to the chart they are
// given; that must not reach the next caller.
func TestModelServerReturnsCopies(t *testing.T) {
	a, err := helmcharts.ModelServer()
	if err != nil {
		t.Fatal(err)
	}
	a.Metadata.Version = "9.9.9"
	a.Values["serving"].(map[string]any)["replicas"] = 99
	a.Templates = nil
	b, err := helmcharts.ModelServer()
	if err != nil {
		t.Fatal(err)
	}
	if b.Metadata.Version != chartVersion {
		t.Errorf("metadata change leaked: version %q", b.Metadata.Version)
	}
	if got := b.Values["serving"].(map[string]any)["replicas"]; got == 99 {
		t.Errorf("values change leaked: replicas %v", got)
	}
	if len(b.Templates) == 0 {
		t.Errorf("templates change leaked")
	}
}

// TestOperatorValuesOverrideEveryDefault: Helm merges the operator's values
// into values.yaml (maps key by key), so a default the operator leaves out
// would reach the cluster. The merged values must be the operator's.
func TestOperatorValuesOverrideEveryDefault(t *testing.T) {
	c, err := helmcharts.ModelServer()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range renderCases() {
		t.Run(tc.name, func(t *testing.T) {
			v := valuesFor(t, tc.ms, tc.in)
			m, err := v.Map()
			if err != nil {
				t.Fatal(err)
			}
			merged, err := chartutil.CoalesceValues(c, m)
			if err != nil {
				t.Fatal(err)
			}
			got := strictValues(t, merged)
			if !v.Volume.Create {
				// values.go leaves size and accessMode out for an existing
				// claim, so the defaults fill them in; the chart does not
				// read them then.
				got.Volume.Size, got.Volume.AccessMode = v.Volume.Size, v.Volume.AccessMode
			}
			if v.Volume.PerPod {
				got.Volume.ClaimName = "" // no claim: the chart does not read it
			}
			got.Warnings, got.WaitsForAPIs = v.Warnings, v.WaitsForAPIs // not chart values
			if !equality.Semantic.DeepEqual(got, v) {
				want, _ := json.MarshalIndent(v, "", "  ")
				have, _ := json.MarshalIndent(got, "", "  ")
				t.Errorf("merged values differ from the operator's:\nwant %s\ngot  %s", want, have)
			}
		})
	}
}

// TestSchemaRejectsBadValues: values.schema.json stops values the chart
// would render into a broken stack.
func TestSchemaRejectsBadValues(t *testing.T) {
	good := func(t *testing.T) map[string]any {
		t.Helper()
		m, err := valuesFor(t, modelServer("resnet", func(ms *servingv1alpha1.ModelServer) {
			ms.UID = "6b7b1c9e-1111-4a2b-9c3d-0123456789ab"
		}), values.Inputs{Served: fetched}).Map()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if _, err := helmcharts.Render(good(t), "resnet", namespace); err != nil {
		t.Fatalf("good values rejected: %v", err)
	}

	sub := func(m map[string]any, key string) map[string]any { return m[key].(map[string]any) }
	first := func(m map[string]any, key string) map[string]any { return m[key].([]any)[0].(map[string]any) }
	cases := map[string]func(m map[string]any){
		"negative replicas":           func(m map[string]any) { sub(m, "serving")["replicas"] = -1 },
		"fractional replicas":         func(m map[string]any) { sub(m, "serving")["replicas"] = 1.5 },
		"privileged grpc port":        func(m map[string]any) { sub(m, "serving")["grpcPort"] = 80 },
		"rest port above 65535":       func(m map[string]any) { sub(m, "serving")["restPort"] = 70000 },
		"port as a string":            func(m map[string]any) { sub(m, "serving")["restPort"] = "8501" },
		"unknown top-level key":       func(m map[string]any) { m["replicas"] = 2 },
		"unknown names key":           func(m map[string]any) { sub(m, "names")["secret"] = "x" },
		"unknown model key":           func(m map[string]any) { first(m, "models")["version"] = 1 },
		"unknown fetch key":           func(m map[string]any) { first(m, "fetches")["workingDir"] = "/" },
		"empty fetch command":         func(m map[string]any) { first(m, "fetches")["command"] = []any{} },
		"unknown volume key":          func(m map[string]any) { sub(m, "volume")["hostPath"] = "/data" },
		"unknown serving key":         func(m map[string]any) { sub(m, "serving")["command"] = []any{"sh"} },
		"unknown service key":         func(m map[string]any) { sub(m, "service")["nodePort"] = 30000 },
		"unknown owner key":           func(m map[string]any) { sub(m, "owner")["controller"] = false },
		"unknown pod key":             func(m map[string]any) { sub(m, "pod")["hostNetwork"] = true },
		"ExternalName service":        func(m map[string]any) { sub(m, "service")["type"] = "ExternalName" },
		"bad pull policy":             func(m map[string]any) { sub(m, "serving")["imagePullPolicy"] = "Sometimes" },
		"modelConfig without newline": func(m map[string]any) { sub(m, "configFiles")["models.config"] = "model_config_list {}" },
		"modelConfig two newlines":    func(m map[string]any) { sub(m, "configFiles")["models.config"] = "model_config_list {}\n\n" },
		"indented modelConfig":        func(m map[string]any) { sub(m, "configFiles")["models.config"] = "  model_config_list {}\n" },
		"config file outside the dir": func(m map[string]any) { sub(m, "configFiles")["../etc.config"] = "x\n" },
		"no models":                   func(m map[string]any) { m["models"] = []any{} },
		"hpa without metrics": func(m map[string]any) {
			m["autoscaling"] = map[string]any{"minReplicas": 1, "maxReplicas": 2, "metrics": []any{}}
		},
		"pdb allowing no disruption": func(m map[string]any) { m["disruption"] = map[string]any{"maxUnavailable": 0} },
		"route without a parent": func(m map[string]any) {
			m["routes"] = map[string]any{"parentRefs": []any{}, "http": true, "httpMatches": []any{map[string]any{"type": "PathPrefix", "value": "/v1/models/resnet"}}, "grpc": true}
		},
		"backend TLS CA without its ConfigMap": func(m map[string]any) {
			m["backendTLS"] = map[string]any{"hostname": "resnet.ml.svc", "ca": "-----BEGIN CERTIFICATE-----\n"}
		},
		"backend TLS without a hostname": func(m map[string]any) { m["backendTLS"] = map[string]any{"hostname": ""} },
		"route of a regular expression": func(m map[string]any) {
			m["routes"] = map[string]any{"parentRefs": []any{map[string]any{"name": "gw"}}, "http": true, "grpc": false,
				"httpMatches": []any{map[string]any{"type": "RegularExpression", "value": "/v1/.*"}}}
		},
		"negative drain":           func(m map[string]any) { sub(m, "serving")["drainSeconds"] = -1 },
		"no time to load":          func(m map[string]any) { sub(m, "serving")["loadTimeoutSeconds"] = 0 },
		"model name with a slash":  func(m map[string]any) { first(m, "models")["name"] = "a/../b" },
		"job name too long":        func(m map[string]any) { first(m, "fetches")["name"] = strings.Repeat("a", 64) },
		"upper-case service name":  func(m map[string]any) { sub(m, "names")["service"] = "ResNet" },
		"label value not a string": func(m map[string]any) { sub(sub(m, "labels"), "common")["team"] = 1 },
		"negative backoff limit":   func(m map[string]any) { first(m, "fetches")["backoffLimit"] = -1 },
		"empty fetch args":         func(m map[string]any) { first(m, "fetches")["args"] = []any{} },
		"bad access mode":          func(m map[string]any) { sub(m, "volume")["accessMode"] = "ReadWriteSometimes" },
		"bad size":                 func(m map[string]any) { sub(m, "volume")["size"] = "ten gigs" },
		"owner without uid":        func(m map[string]any) { delete(sub(m, "owner"), "uid") },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			m := good(t)
			mutate(m)
			if _, err := helmcharts.Render(m, "resnet", namespace); err == nil {
				t.Errorf("values accepted")
			} else if !strings.Contains(err.Error(), "schema") {
				t.Errorf("error does not come from the schema: %v", err)
			}
		})
	}

	// Required keys: values.yaml supplies them when Helm merges, so check
	// the schema alone.
	c, err := helmcharts.ModelServer()
	if err != nil {
		t.Fatal(err)
	}
	m := good(t)
	delete(sub(m, "configFiles"), "models.config")
	if err := chartutil.ValidateAgainstSingleSchema(m, c.Schema); err == nil {
		t.Errorf("values without a model config were accepted")
	}
	m = good(t)
	delete(sub(m, "volume"), "size")
	if err := chartutil.ValidateAgainstSingleSchema(m, c.Schema); err == nil {
		t.Errorf("a created claim without a size was accepted")
	}
	sub(m, "volume")["create"] = false
	if err := chartutil.ValidateAgainstSingleSchema(m, c.Schema); err != nil {
		t.Errorf("an existing claim without a size was rejected: %v", err)
	}
}

// checkStack makes the assertions every rendered stack must pass.
func checkStack(t *testing.T, ms *servingv1alpha1.ModelServer, v *values.Values, objs *objects) { //nolint:gocognit // a flat checklist, object by object, of what every stack must hold: its score is its number of checks, not nesting
	t.Helper()

	// Exactly the expected kinds.
	wantKinds := []string{"ConfigMap", "Deployment", "Service"}
	for range v.Fetches {
		wantKinds = append(wantKinds, "Job")
	}
	if v.Volume.Create {
		wantKinds = append(wantKinds, "PersistentVolumeClaim")
	}
	if v.BackendTLS != nil && v.BackendTLS.CA != "" {
		wantKinds = append(wantKinds, "ConfigMap")
	}
	for kind, on := range map[string]bool{
		"HorizontalPodAutoscaler": v.Autoscaling != nil,
		"PodDisruptionBudget":     v.Disruption != nil,
		"Ingress":                 v.Ingress != nil,
		"NetworkPolicy":           v.NetworkPolicy != nil,
		"HTTPRoute":               v.Routes != nil && v.Routes.HTTP,
		"GRPCRoute":               v.Routes != nil && v.Routes.GRPC,
		"BackendTLSPolicy":        v.BackendTLS != nil,
		"ServiceMonitor":          v.Monitoring.ServiceMonitor != nil,
	} {
		if on {
			wantKinds = append(wantKinds, kind)
		}
	}
	sort.Strings(wantKinds)
	gotKinds := slices.Sorted(slices.Values(objs.kinds))
	if !slices.Equal(gotKinds, wantKinds) {
		t.Fatalf("rendered kinds %q, want %q", gotKinds, wantKinds)
	}

	// Metadata of every object.
	cm, d, svc := objs.configMap(t), objs.deployment(t), objs.service(t)
	metas := []struct {
		meta      metav1.ObjectMeta
		name      string
		component string
	}{
		{cm.ObjectMeta, v.Names.ConfigMap, "model-config"},
		{d.ObjectMeta, v.Names.Deployment, "serving"},
		{svc.ObjectMeta, v.Names.Service, "serving"},
	}
	for i, f := range v.Fetches {
		metas = append(metas, struct {
			meta      metav1.ObjectMeta
			name      string
			component string
		}{objs.jobs[i].ObjectMeta, f.Name, values.ComponentFetch})
	}
	for _, o := range objs.extras {
		name := v.Names.Deployment
		if v.BackendTLS != nil && o.Name == v.BackendTLS.CAConfigMap {
			name = names.GatewayCA(ms.Name)
		}
		metas = append(metas, struct {
			meta      metav1.ObjectMeta
			name      string
			component string
		}{o, name, "serving"})
	}
	if v.Volume.Create {
		metas = append(metas, struct {
			meta      metav1.ObjectMeta
			name      string
			component string
		}{objs.claim(t).ObjectMeta, v.Names.Claim, "model-storage"})
	}
	for _, m := range metas {
		if m.meta.Name != m.name || m.meta.Namespace != namespace {
			t.Errorf("object %s/%s, want %s/%s", m.meta.Namespace, m.meta.Name, namespace, m.name)
		}
		checkLabels(t, m.name, m.meta.Labels, v.Labels.Common)
		if got := m.meta.Labels[values.LabelModelServer]; got != ms.Name {
			t.Errorf("%s: label %s = %q, want %q", m.name, values.LabelModelServer, got, ms.Name)
		}
		if got := m.meta.Labels[values.LabelComponent]; got != m.component {
			t.Errorf("%s: component %q, want %q", m.name, got, m.component)
		}
		checkOwner(t, m.name, m.meta.OwnerReferences, ms)
	}

	// ConfigMap: the config files, byte for byte.
	if !maps.Equal(cm.Data, v.ConfigFiles) || len(cm.BinaryData) != 0 {
		t.Errorf("ConfigMap data = %q, want %q", cm.Data, v.ConfigFiles)
	}

	// Deployment.
	if d.Spec.Replicas == nil || *d.Spec.Replicas != v.Serving.Replicas {
		t.Errorf("deployment replicas = %v, want %d", d.Spec.Replicas, v.Serving.Replicas)
	}
	if d.Spec.Selector == nil || !maps.Equal(d.Spec.Selector.MatchLabels, v.Labels.Selector) || len(d.Spec.Selector.MatchExpressions) != 0 {
		t.Errorf("deployment selector = %v, want %v", d.Spec.Selector, v.Labels.Selector)
	}
	if !labels.SelectorFromSet(v.Labels.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("deployment selector %v does not select its pods %v", v.Labels.Selector, d.Spec.Template.Labels)
	}
	checkLabels(t, "serving pods", d.Spec.Template.Labels, v.Labels.Pod)
	checkLabels(t, "serving pods", d.Spec.Template.Labels, v.Pod.Labels)
	ru := d.Spec.Strategy.RollingUpdate
	surge, unavailable := intstr.FromInt32(1), intstr.FromInt32(0)
	if r := ms.Spec.Rollout; r != nil {
		surge, unavailable = ptr.Deref(r.MaxSurge, surge), ptr.Deref(r.MaxUnavailable, unavailable)
	}
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || ru == nil ||
		ru.MaxUnavailable == nil || *ru.MaxUnavailable != unavailable || ru.MaxSurge == nil || *ru.MaxSurge != surge {
		t.Errorf("deployment strategy = %+v, want a rolling update with maxUnavailable %s, maxSurge %s", d.Spec.Strategy, unavailable.String(), surge.String())
	}
	if d.Spec.RevisionHistoryLimit == nil || *d.Spec.RevisionHistoryLimit != 3 {
		t.Errorf("revisionHistoryLimit = %v, want 3", d.Spec.RevisionHistoryLimit)
	}
	if d.Spec.MinReadySeconds != 2 {
		t.Errorf("minReadySeconds = %d, want 2: a pod ready for a moment must not replace an old one", d.Spec.MinReadySeconds)
	}
	wantAnnotations := map[string]string{values.AnnotationRestartChecksum: v.Serving.RestartChecksum}
	maps.Copy(wantAnnotations, v.Serving.Annotations)
	maps.Copy(wantAnnotations, v.Pod.Annotations)
	if !maps.Equal(d.Spec.Template.Annotations, wantAnnotations) {
		t.Errorf("serving pod annotations = %v, want %v", d.Spec.Template.Annotations, wantAnnotations)
	}
	ps := d.Spec.Template.Spec
	if ps.TerminationGracePeriodSeconds == nil || *ps.TerminationGracePeriodSeconds != v.Serving.TerminationGracePeriodSeconds {
		t.Errorf("terminationGracePeriodSeconds = %v, want %d", ps.TerminationGracePeriodSeconds, v.Serving.TerminationGracePeriodSeconds)
	}
	if ps.PriorityClassName != v.Serving.PriorityClassName || ptr.Deref(ps.RuntimeClassName, "") != v.Serving.RuntimeClassName {
		t.Errorf("priorityClassName = %q, runtimeClassName = %v, want %q and %q", ps.PriorityClassName, ps.RuntimeClassName, v.Serving.PriorityClassName, v.Serving.RuntimeClassName)
	}
	if !equality.Semantic.DeepEqual(ps.TopologySpreadConstraints, v.Serving.TopologySpreadConstraints) {
		t.Errorf("topologySpreadConstraints = %+v, want %+v", ps.TopologySpreadConstraints, v.Serving.TopologySpreadConstraints)
	}
	checkRestricted(t, "serving pod", ps)
	servingPod := v.Pod
	servingPod.Tolerations = v.Serving.Tolerations
	servingPod.NodeSelector = union(v.Pod.NodeSelector, v.Serving.NodeSelector)
	checkPodSettings(t, "serving pod", ps, servingPod)
	checkInitContainers(t, v, ps)
	c := ps.Containers[0]
	if c.Name != "tensorflow-serving" || c.Image != v.Serving.Image || c.ImagePullPolicy != v.Serving.ImagePullPolicy {
		t.Errorf("serving container %q image %q %q, want tensorflow-serving %q %q", c.Name, c.Image, c.ImagePullPolicy, v.Serving.Image, v.Serving.ImagePullPolicy)
	}
	if !slices.Equal(c.Command, []string{"tensorflow_model_server"}) {
		t.Errorf("serving command = %q", c.Command)
	}
	if !slices.Equal(c.Args, v.Serving.Args) {
		t.Errorf("serving args = %q, want %q", c.Args, v.Serving.Args)
	}
	for _, want := range []string{
		"--port=" + itoa(v.Serving.GRPCPort),
		"--rest_api_port=" + itoa(v.Serving.RESTPort),
		"--model_config_file=" + values.ConfigMountPath + "/" + values.ModelConfigFile,
	} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("serving args %q lack %s", c.Args, want)
		}
	}
	for _, a := range c.Args {
		if file, ok := strings.CutPrefix(a[strings.Index(a, "=")+1:], values.ConfigMountPath+"/"); ok && strings.HasSuffix(a[:strings.Index(a, "=")], "_file") {
			if _, ok := cm.Data[file]; !ok {
				t.Errorf("serving arg %s names a file the ConfigMap does not hold", a)
			}
		}
	}
	var wantLifecycle *corev1.Lifecycle
	if v.Serving.DrainSeconds > 0 {
		wantLifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: v.Serving.DrainSeconds}}}
	}
	if !equality.Semantic.DeepEqual(c.Lifecycle, wantLifecycle) {
		t.Errorf("serving lifecycle = %+v, want a preStop sleep of %ds", c.Lifecycle, v.Serving.DrainSeconds)
	}
	wantPorts := []corev1.ContainerPort{
		{Name: "grpc", ContainerPort: v.Serving.GRPCPort, Protocol: corev1.ProtocolTCP},
		{Name: "http", ContainerPort: v.Serving.RESTPort, Protocol: corev1.ProtocolTCP},
	}
	if !equality.Semantic.DeepEqual(c.Ports, wantPorts) {
		t.Errorf("serving ports = %+v, want %+v", c.Ports, wantPorts)
	}
	if !equality.Semantic.DeepEqual(c.Env, v.Serving.Env) {
		t.Errorf("serving env = %+v, want %+v", c.Env, v.Serving.Env)
	}
	if !equality.Semantic.DeepEqual(c.Resources, v.Serving.Resources) {
		t.Errorf("serving resources = %+v, want %+v", c.Resources, v.Serving.Resources)
	}
	wantReadiness := corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: v.Serving.ReadinessPath, Port: intstr.FromString("http")}}
	if p := c.ReadinessProbe; p == nil || !equality.Semantic.DeepEqual(p.ProbeHandler, wantReadiness) || p.PeriodSeconds != 5 || p.FailureThreshold != 3 {
		t.Errorf("readiness probe = %+v, want GET %s on http every 5s", p, v.Serving.ReadinessPath)
	}
	if p := c.StartupProbe; p == nil || p.TCPSocket == nil || p.TCPSocket.Port != intstr.FromString("http") || p.PeriodSeconds != 1 || int64(p.FailureThreshold) != v.Serving.LoadTimeoutSeconds {
		t.Errorf("startup probe = %+v, want the REST port checked every second, %d times", p, v.Serving.LoadTimeoutSeconds)
	}
	if p := c.LivenessProbe; p == nil || p.TCPSocket == nil || p.TCPSocket.Port != intstr.FromString("grpc") || p.PeriodSeconds != 10 || p.FailureThreshold != 3 {
		t.Errorf("liveness probe = %+v", p)
	}
	if c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		t.Errorf("serving terminationMessagePolicy = %q, want the log's tail for the status to quote", c.TerminationMessagePolicy)
	}
	wantMounts := []corev1.VolumeMount{
		{Name: "model", MountPath: values.ModelsMountPath, ReadOnly: true},
		{Name: "config", MountPath: values.ConfigMountPath, ReadOnly: true},
		{Name: "tmp", MountPath: "/tmp"},
	}
	if v.Serving.TLS != nil {
		wantMounts = append(wantMounts, corev1.VolumeMount{Name: "tls-config", MountPath: values.SSLConfigDir, ReadOnly: true})
	}
	if !equality.Semantic.DeepEqual(c.VolumeMounts, wantMounts) {
		t.Errorf("serving mounts = %+v, want %+v", c.VolumeMounts, wantMounts)
	}
	wantVolumes := []corev1.Volume{
		{Name: "model", VolumeSource: modelVolume(v, true)},
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: v.Names.ConfigMap}}}},
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	wantVolumes = append(wantVolumes, v.Serving.FetchVolumes...)
	if t := v.Serving.TLS; t != nil {
		wantVolumes = append(wantVolumes,
			corev1.Volume{Name: "tls-secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: t.SecretName, DefaultMode: ptr.To[int32](0o440)}}})
		if ca := t.ClientCA; ca != nil {
			items := []corev1.KeyToPath{{Key: ca.Key, Path: "ca.crt"}}
			source := corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: ca.SecretName, Items: items}}
			if ca.ConfigMapName != "" {
				source = corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: ca.ConfigMapName}, Items: items}}
			}
			wantVolumes = append(wantVolumes, corev1.Volume{Name: values.TLSClientCAVolumeName, VolumeSource: source})
		}
		wantVolumes = append(wantVolumes,
			corev1.Volume{Name: "tls-config", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("1Mi"))}}})
	}
	if !equality.Semantic.DeepEqual(ps.Volumes, wantVolumes) {
		have, _ := json.Marshal(ps.Volumes)
		want, _ := json.Marshal(wantVolumes)
		t.Errorf("serving volumes = %s, want %s", have, want)
	}
	for _, m := range v.Models {
		if m.BasePath != "" && !strings.HasPrefix(m.BasePath, values.ModelsMountPath+"/") {
			t.Errorf("model base path %q is not on the model volume %s", m.BasePath, values.ModelsMountPath)
		}
	}

	// Service.
	if !maps.Equal(svc.Annotations, v.Service.Annotations) {
		t.Errorf("service annotations = %v, want %v", svc.Annotations, v.Service.Annotations)
	}
	if svc.Spec.Type != v.Service.Type || !maps.Equal(svc.Spec.Selector, v.Labels.Selector) {
		t.Errorf("service type %q selector %v, want %q %v", svc.Spec.Type, svc.Spec.Selector, v.Service.Type, v.Labels.Selector)
	}
	if got := ptr.Deref(svc.Spec.TrafficDistribution, ""); got != ms.Spec.Service.TrafficDistribution {
		t.Errorf("service trafficDistribution %q, want spec.service's %q", got, ms.Spec.Service.TrafficDistribution)
	}
	wantSvcPorts := []corev1.ServicePort{
		{Name: "grpc", Protocol: corev1.ProtocolTCP, AppProtocol: ptr.To("grpc"), Port: v.Serving.GRPCPort, TargetPort: intstr.FromInt32(v.Serving.GRPCPort)},
		{Name: "http", Protocol: corev1.ProtocolTCP, AppProtocol: ptr.To("http"), Port: v.Serving.RESTPort, TargetPort: intstr.FromInt32(v.Serving.RESTPort)},
	}
	if !equality.Semantic.DeepEqual(svc.Spec.Ports, wantSvcPorts) {
		t.Errorf("service ports = %+v, want %+v", svc.Spec.Ports, wantSvcPorts)
	}

	// PersistentVolumeClaim.
	if v.Volume.Create {
		pvc := objs.claim(t)
		if pvc.Name != v.Volume.ClaimName {
			t.Errorf("claim %q, but the pods mount %q", pvc.Name, v.Volume.ClaimName)
		}
		if !slices.Equal(pvc.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.PersistentVolumeAccessMode(v.Volume.AccessMode)}) {
			t.Errorf("claim access modes = %v, want [%s]", pvc.Spec.AccessModes, v.Volume.AccessMode)
		}
		if got := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(resource.MustParse(v.Volume.Size)) != 0 {
			t.Errorf("claim size = %s, want %s", got.String(), v.Volume.Size)
		}
		// An empty storageClassName is not the default class but no class
		// at all (no dynamic provisioning): leave it out instead.
		if v.Volume.StorageClassName == "" && pvc.Spec.StorageClassName != nil {
			t.Errorf("claim storage class = %q, want none (the default class)", *pvc.Spec.StorageClassName)
		} else if got := ptr.Deref(pvc.Spec.StorageClassName, ""); got != v.Volume.StorageClassName {
			t.Errorf("claim storage class = %q, want %q", got, v.Volume.StorageClassName)
		}
	}

	// Jobs.
	for i, f := range v.Fetches {
		checkJob(t, v, f, &objs.jobs[i])
	}
}

func checkJob(t *testing.T, v *values.Values, fetch values.Fetch, job *batchv1.Job) {
	t.Helper()
	if job.Name != fetch.Name {
		t.Errorf("job %s, want %s", job.Name, fetch.Name)
	}
	if job.Spec.BackoffLimit == nil || *job.Spec.BackoffLimit != fetch.BackoffLimit {
		t.Errorf("job backoffLimit = %v, want %d", job.Spec.BackoffLimit, fetch.BackoffLimit)
	}
	if job.Spec.ActiveDeadlineSeconds == nil || *job.Spec.ActiveDeadlineSeconds != fetch.ActiveDeadline {
		t.Errorf("job activeDeadlineSeconds = %v, want %d", job.Spec.ActiveDeadlineSeconds, fetch.ActiveDeadline)
	}
	if job.Spec.Selector != nil {
		t.Errorf("job has a selector; the Job controller makes its own")
	}
	jl := job.Spec.Template.Labels
	checkLabels(t, "fetch pod", jl, v.Labels.Pod)
	checkLabels(t, "fetch pod", jl, v.Pod.Labels)
	if jl[values.LabelComponent] != values.ComponentFetch {
		t.Errorf("fetch pod component = %q, want %s", jl[values.LabelComponent], values.ComponentFetch)
	}
	if labels.SelectorFromSet(v.Labels.Selector).Matches(labels.Set(jl)) {
		t.Errorf("the Service's selector %v selects the fetch pod %v", v.Labels.Selector, jl)
	}
	if !maps.Equal(job.Spec.Template.Annotations, v.Pod.Annotations) {
		t.Errorf("fetch pod annotations = %v, want %v", job.Spec.Template.Annotations, v.Pod.Annotations)
	}
	jps := job.Spec.Template.Spec
	if jps.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("fetch pod restartPolicy = %q, want Never", jps.RestartPolicy)
	}
	checkRestricted(t, "fetch pod", jps)
	fetchPod := v.Pod
	fetchPod.NodeSelector = union(v.Pod.NodeSelector, fetch.NodeSelector)
	checkPodSettings(t, "fetch pod", jps, fetchPod)
	if len(jps.Containers) != 1 || len(jps.InitContainers) != 0 {
		t.Fatalf("fetch pod has containers %d and init containers %d, want 1 and 0", len(jps.Containers), len(jps.InitContainers))
	}
	fc := jps.Containers[0]
	if fc.Name != values.FetchContainerName || fc.Image != fetch.Image || fc.ImagePullPolicy != fetch.ImagePullPolicy {
		t.Errorf("fetch container %q image %q %q", fc.Name, fc.Image, fc.ImagePullPolicy)
	}
	if !slices.Equal(fc.Command, fetch.Command) || !slices.Equal(fc.Args, fetch.Args) {
		t.Errorf("fetch command %q args %q, want %q %q", fc.Command, fc.Args, fetch.Command, fetch.Args)
	}
	if !equality.Semantic.DeepEqual(fc.Env, fetch.Env) {
		t.Errorf("fetch env = %v, want the operator's proxy env %v", fc.Env, fetch.Env)
	}
	if !equality.Semantic.DeepEqual(fc.Resources, fetch.Resources) {
		t.Errorf("fetch resources = %+v, want %+v", fc.Resources, fetch.Resources)
	}
	if fc.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		t.Errorf("fetch terminationMessagePolicy = %q", fc.TerminationMessagePolicy)
	}
	wantFetchMounts, wantFetchVolumes := fetchVolumes(t, v, fetch, fc)
	if !equality.Semantic.DeepEqual(fc.VolumeMounts, wantFetchMounts) {
		t.Errorf("fetch mounts = %+v, want %+v", fc.VolumeMounts, wantFetchMounts)
	}
	if !equality.Semantic.DeepEqual(jps.Volumes, wantFetchVolumes) {
		t.Errorf("fetch volumes = %+v, want %+v", jps.Volumes, wantFetchVolumes)
	}
}

// checkRestricted checks the restricted Pod Security Standard.
// checkInitContainers: the serving pod writes its SSL config from
// spec.tls's Secret, mounted there alone, first; then it waits, in one init
// container, for the fetch manifest of every model it is configured with,
// on the model volume mounted read-only.
func checkInitContainers(t *testing.T, v *values.Values, ps corev1.PodSpec) {
	t.Helper()
	type want struct {
		name   string
		c      *values.InitContainer
		mounts []corev1.VolumeMount
	}
	var wants []want
	if tls := v.Serving.TLS; tls != nil {
		mounts := []corev1.VolumeMount{{Name: "tls-secret", MountPath: values.TLSSecretMountPath, ReadOnly: true}}
		if tls.ClientCA != nil {
			mounts = append(mounts, corev1.VolumeMount{Name: values.TLSClientCAVolumeName, MountPath: values.TLSClientCAMountPath, ReadOnly: true})
		}
		mounts = append(mounts, corev1.VolumeMount{Name: "tls-config", MountPath: values.SSLConfigDir})
		wants = append(wants, want{values.TLSConfigContainerName, &tls.Config, mounts})
		if !slices.Contains(v.Serving.Args, "--ssl_config_file="+values.SSLConfigPath) || tls.Config.Args[len(tls.Config.Args)-1] != values.SSLConfigPath {
			t.Errorf("TF Serving reads %q and tls-config writes %q, want both %s", v.Serving.Args, tls.Config.Args, values.SSLConfigPath)
		}
	}
	if w := v.Serving.ModelWait; w != nil {
		wants = append(wants, want{values.ModelWaitContainerName, w, []corev1.VolumeMount{{Name: "model", MountPath: values.ModelsMountPath, ReadOnly: true}}})
		for _, m := range v.Models {
			if m.BasePath != "" && !slices.Contains(w.Args, m.BasePath+"/"+fetchcontract.ManifestName) {
				t.Errorf("init container args %q do not wait for model %s at %s", w.Args, m.Name, m.BasePath)
			}
		}
	}
	for _, f := range v.Serving.ModelFetches {
		wants = append(wants, want{f.Name, &f.InitContainer, f.VolumeMounts})
		dest := f.Args[slices.Index(f.Args, "--dest")+1]
		if !slices.ContainsFunc(v.Models, func(m values.Model) bool { return m.BasePath == dest }) ||
			!slices.Contains(f.Args, values.ConfigMountPath+"/"+values.PinsFile) {
			t.Errorf("fetch container %s args %q: want a served model's base path, pinned by %s", f.Name, f.Args, values.PinsFile)
		}
	}
	if len(ps.Containers) != 1 || len(ps.InitContainers) != len(wants) {
		t.Fatalf("serving pod has containers %d and init containers %d, want 1 and %d", len(ps.Containers), len(ps.InitContainers), len(wants))
	}
	for i, w := range wants {
		ic := ps.InitContainers[i]
		if ic.Name != w.name || ic.Image != w.c.Image || ic.ImagePullPolicy != w.c.ImagePullPolicy ||
			!slices.Equal(ic.Command, w.c.Command) || !slices.Equal(ic.Args, w.c.Args) {
			t.Errorf("init container %d: %s %s %s %q %q, want %s %s %s %q %q", i, ic.Name, ic.Image, ic.ImagePullPolicy, ic.Command, ic.Args,
				w.name, w.c.Image, w.c.ImagePullPolicy, w.c.Command, w.c.Args)
		}
		if !equality.Semantic.DeepEqual(ic.VolumeMounts, w.mounts) {
			t.Errorf("init container %s mounts %+v, want %+v", ic.Name, ic.VolumeMounts, w.mounts)
		}
		if ic.Resources.Requests.Cpu().IsZero() || ic.Resources.Limits.Memory().IsZero() {
			t.Errorf("init container %s resources %+v lack a CPU request or a memory limit", ic.Name, ic.Resources)
		}
	}
}

// modelVolume is the source of a pod's model volume: the claim, or, in
// storage mode PerPod, an ephemeral claim of the storage class, or an
// emptyDir of the size.
func modelVolume(v *values.Values, readOnly bool) corev1.VolumeSource {
	vol := v.Volume
	switch {
	case vol.PerPod && vol.StorageClassName != "":
		return corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Labels: v.Labels.Pod},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: ptr.To(vol.StorageClassName),
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(vol.Size)}},
			},
		}}}
	case vol.PerPod:
		return corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse(vol.Size))}}
	}
	return corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: vol.ClaimName, ReadOnly: readOnly}}
}

// fetchVolumes are the mounts and volumes a fetch Job's pod must have, for
// what its values ask: the credentials Secret, the pull secrets, the
// projected token, the model config.
func fetchVolumes(t *testing.T, v *values.Values, fetch values.Fetch, fc corev1.Container) ([]corev1.VolumeMount, []corev1.Volume) {
	t.Helper()
	wantFetchMounts := []corev1.VolumeMount{
		{Name: "model", MountPath: values.ModelsMountPath, ReadOnly: !v.Volume.Create && !v.Volume.PerPod},
		{Name: "tmp", MountPath: "/tmp"},
	}
	wantFetchVolumes := []corev1.Volume{
		{Name: "model", VolumeSource: modelVolume(v, !v.Volume.Create)},
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	if fetch.CredentialsSecret != "" {
		wantFetchMounts = append(wantFetchMounts, corev1.VolumeMount{Name: "credentials", MountPath: values.CredentialsMountPath, ReadOnly: true})
		wantFetchVolumes = append(wantFetchVolumes, corev1.Volume{Name: "credentials", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: fetch.CredentialsSecret, DefaultMode: ptr.To[int32](0o440)},
		}})
	}
	if len(fetch.PullSecrets) > 0 {
		wantFetchMounts = append(wantFetchMounts, corev1.VolumeMount{Name: "pull-secrets", MountPath: values.PullSecretsMountPath, ReadOnly: true})
		var sources []corev1.VolumeProjection
		for _, name := range fetch.PullSecrets {
			sources = append(sources, corev1.VolumeProjection{Secret: &corev1.SecretProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: name},
				Optional:             ptr.To(true),
				Items: []corev1.KeyToPath{
					{Key: corev1.DockerConfigJsonKey, Path: name + "/" + corev1.DockerConfigJsonKey},
					{Key: corev1.DockerConfigKey, Path: name + "/" + corev1.DockerConfigKey},
				},
			}})
		}
		wantFetchVolumes = append(wantFetchVolumes, corev1.Volume{Name: "pull-secrets", VolumeSource: corev1.VolumeSource{
			Projected: &corev1.ProjectedVolumeSource{Sources: sources, DefaultMode: ptr.To[int32](0o440)},
		}})
	}
	if fetch.WebIdentityAudience != "" {
		if i := slices.Index(fc.Args, "--web-identity-token-file"); i < 0 || i+1 == len(fc.Args) || fc.Args[i+1] != values.WebIdentityTokenPath {
			t.Errorf("fetch args %q do not name the projected token", fc.Args)
		}
		wantFetchMounts = append(wantFetchMounts, corev1.VolumeMount{Name: "web-identity", MountPath: path.Dir(values.WebIdentityTokenPath), ReadOnly: true})
		wantFetchVolumes = append(wantFetchVolumes, corev1.Volume{Name: "web-identity", VolumeSource: corev1.VolumeSource{
			Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](0o440), Sources: []corev1.VolumeProjection{{
				ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: fetch.WebIdentityAudience, ExpirationSeconds: ptr.To[int64](3600), Path: path.Base(values.WebIdentityTokenPath)},
			}}},
		}})
	} else if slices.Contains(fc.Args, "--web-identity-token-file") {
		t.Errorf("fetch args %q name a token the Job does not mount", fc.Args)
	}
	if fetch.ReadsModelConfig {
		// The file the fetcher is told to read is the serving pods'.
		if i := slices.Index(fc.Args, values.ServedConfigFlag); i < 0 || i+1 == len(fc.Args) ||
			fc.Args[i+1] != path.Join(values.ConfigMountPath, values.ModelConfigFile) {
			t.Errorf("fetch args %q do not name the mounted model config", fc.Args)
		}
		wantFetchMounts = append(wantFetchMounts, corev1.VolumeMount{Name: "config", MountPath: values.ConfigMountPath, ReadOnly: true})
		wantFetchVolumes = append(wantFetchVolumes, corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: v.Names.ConfigMap},
				Optional:             ptr.To(true),
				Items:                []corev1.KeyToPath{{Key: values.ModelConfigFile, Path: values.ModelConfigFile}},
			},
		}})
	} else if slices.Contains(fc.Args, values.ServedConfigFlag) {
		t.Errorf("fetch args %q name a model config the Job does not mount", fc.Args)
	}
	return wantFetchMounts, wantFetchVolumes
}

func checkRestricted(t *testing.T, what string, ps corev1.PodSpec) {
	t.Helper()
	sc := ps.SecurityContext
	if sc == nil || !ptr.Deref(sc.RunAsNonRoot, false) || ptr.Deref(sc.RunAsUser, 0) == 0 ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: security context %+v is not restricted", what, sc)
	}
	if sc != nil && (ptr.Deref(sc.RunAsUser, 0) != 65532 || ptr.Deref(sc.RunAsGroup, 0) != 65532 || ptr.Deref(sc.FSGroup, 0) != 65532) {
		t.Errorf("%s: runs as %v:%v fsGroup %v, want 65532", what, sc.RunAsUser, sc.RunAsGroup, sc.FSGroup)
	}
	if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
		t.Errorf("%s: mounts a service account token", what)
	}
	if ps.HostNetwork || ps.HostPID || ps.HostIPC {
		t.Errorf("%s: uses host namespaces", what)
	}
	for _, vol := range ps.Volumes {
		if vol.HostPath != nil {
			t.Errorf("%s: hostPath volume %s", what, vol.Name)
		}
	}
	for _, c := range slices.Concat(ps.InitContainers, ps.Containers) {
		sc := c.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || ptr.Deref(sc.Privileged, false) ||
			!ptr.Deref(sc.RunAsNonRoot, false) || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) ||
			sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
			t.Errorf("%s: container %s security context %+v is not restricted", what, c.Name, sc)
		}
	}
}

// checkPodSettings checks the podTemplate settings both pods share.
func checkPodSettings(t *testing.T, what string, ps corev1.PodSpec, p values.Pod) {
	t.Helper()
	if ps.ServiceAccountName != p.ServiceAccountName {
		t.Errorf("%s: serviceAccountName %q, want %q", what, ps.ServiceAccountName, p.ServiceAccountName)
	}
	if !maps.Equal(ps.NodeSelector, p.NodeSelector) {
		t.Errorf("%s: nodeSelector %v, want %v", what, ps.NodeSelector, p.NodeSelector)
	}
	if !equality.Semantic.DeepEqual(ps.Tolerations, p.Tolerations) {
		t.Errorf("%s: tolerations %+v, want %+v", what, ps.Tolerations, p.Tolerations)
	}
	if !equality.Semantic.DeepEqual(ps.Affinity, p.Affinity) {
		t.Errorf("%s: affinity %+v, want %+v", what, ps.Affinity, p.Affinity)
	}
	if !equality.Semantic.DeepEqual(ps.ImagePullSecrets, p.ImagePullSecrets) {
		t.Errorf("%s: imagePullSecrets %+v, want %+v", what, ps.ImagePullSecrets, p.ImagePullSecrets)
	}
}

// union is a and b in one map, b's entry where both have a key.
func union(a, b map[string]string) map[string]string {
	u := maps.Clone(a)
	if u == nil {
		u = map[string]string{}
	}
	maps.Copy(u, b)
	return u
}

// checkLabels checks that got holds every label of want.
func checkLabels(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: label %s = %q, want %q", what, k, got[k], v)
		}
	}
}

// checkOwner checks the controlling owner reference to ms, if ms has a UID.
func checkOwner(t *testing.T, what string, refs []metav1.OwnerReference, ms *servingv1alpha1.ModelServer) {
	t.Helper()
	if ms.UID == "" {
		if len(refs) != 0 {
			t.Errorf("%s: owner references %+v without an owner", what, refs)
		}
		return
	}
	want := []metav1.OwnerReference{{
		APIVersion:         servingv1alpha1.GroupVersion.String(),
		Kind:               "ModelServer",
		Name:               ms.Name,
		UID:                ms.UID,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}}
	if !equality.Semantic.DeepEqual(refs, want) {
		t.Errorf("%s: owner references %+v, want %+v", what, refs, want)
	}
}

// gatewayAPIs are the Gateway API's route kinds, and its BackendTLSPolicy
// if backendTLS.
func gatewayAPIs(backendTLS bool) map[string]bool {
	return map[string]bool{values.APIKey(values.HTTPRouteKind): true, values.APIKey(values.GRPCRouteKind): true,
		values.APIKey(values.BackendTLSPolicyKind): backendTLS}
}

// tlsThroughGateway is a ModelServer whose gRPC port serves TLS, routed
// through the Gateway gw as mutate leaves spec.gateway.
func tlsThroughGateway(mutate func(*servingv1alpha1.GatewaySpec)) *servingv1alpha1.ModelServer {
	return modelServer("resnet", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.TLS = &servingv1alpha1.TLSSpec{SecretName: "resnet-grpc"}
		ms.Spec.Gateway = &servingv1alpha1.GatewaySpec{ParentRefs: []servingv1alpha1.GatewayParentRef{{Name: "gw"}}}
		if mutate != nil {
			mutate(ms.Spec.Gateway)
		}
	})
}

// tlsInputs are those of a checked spec.tls Secret whose certificate a
// Gateway trusts as trust says, in a cluster with the Gateway API's
// routes, and its BackendTLSPolicy if backendTLS.
func tlsInputs(backendTLS bool, trust *values.GatewayTrust) values.Inputs {
	return values.Inputs{FetchImage: "example.com/operator:1", TLSCertDigest: "d1", APIs: gatewayAPIs(backendTLS), GatewayTrust: trust}
}

// backendTLSPolicy is the spec of the one BackendTLSPolicy rendered.
func backendTLSPolicy(t *testing.T, objs *objects) map[string]any {
	t.Helper()
	return (*only(t, "BackendTLSPolicy", objs.custom["BackendTLSPolicy"]))["spec"].(map[string]any)
}

// objects are the decoded objects of one render.
type objects struct {
	notes      string // NOTES.txt
	kinds      []string
	configMaps []corev1.ConfigMap
	// caConfigMaps hold a BackendTLSPolicy's CA certificates.
	caConfigMaps []corev1.ConfigMap
	deployments  []appsv1.Deployment
	services     []corev1.Service
	claims       []corev1.PersistentVolumeClaim
	jobs         []batchv1.Job
	hpas         []autoscalingv2.HorizontalPodAutoscaler
	pdbs         []policyv1.PodDisruptionBudget
	ingresses    []networkingv1.Ingress
	netpols      []networkingv1.NetworkPolicy
	// custom are the objects of custom resource kinds (routes,
	// ServiceMonitor) by kind, as JSON maps.
	custom map[string][]map[string]any
	// extras is the metadata of the objects besides the stack's core.
	extras []metav1.ObjectMeta
}

func only[T any](t *testing.T, kind string, list []T) *T {
	t.Helper()
	if len(list) != 1 {
		t.Fatalf("%d %s objects rendered, want 1", len(list), kind)
	}
	return &list[0]
}

func (o *objects) configMap(t *testing.T) *corev1.ConfigMap {
	return only(t, "ConfigMap", o.configMaps)
}
func (o *objects) deployment(t *testing.T) *appsv1.Deployment {
	return only(t, "Deployment", o.deployments)
}
func (o *objects) service(t *testing.T) *corev1.Service { return only(t, "Service", o.services) }
func (o *objects) claim(t *testing.T) *corev1.PersistentVolumeClaim {
	return only(t, "PersistentVolumeClaim", o.claims)
}
func (o *objects) job(t *testing.T) *batchv1.Job { return only(t, "Job", o.jobs) }

// renderValues renders v and decodes the result.
func renderValues(t *testing.T, v *values.Values) *objects {
	t.Helper()
	m, err := v.Map()
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := helmcharts.Render(m, v.Labels.Common["app.kubernetes.io/instance"], namespace)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return decodeAll(t, rendered)
}

// decodeAll splits every rendered manifest into documents and decodes each
// strictly (no unknown or duplicate fields) into its API type.
func decodeAll(t *testing.T, rendered map[string]string) *objects {
	t.Helper()
	objs := &objects{}
	for _, file := range slices.Sorted(maps.Keys(rendered)) {
		if strings.HasSuffix(file, "NOTES.txt") {
			objs.notes = rendered[file]
			continue
		}
		if !strings.HasSuffix(file, ".yaml") {
			t.Errorf("unexpected rendered file %s", file)
			continue
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(rendered[file])))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: split documents: %v", file, err)
			}
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s: not YAML: %v\n%s", file, err, doc)
			}
			if tm == (metav1.TypeMeta{}) {
				if j, err := yaml.YAMLToJSON(doc); err != nil || !bytes.Equal(bytes.TrimSpace(j), []byte("null")) {
					t.Errorf("%s: a document without apiVersion and kind:\n%s", file, doc)
				}
				continue
			}
			objs.kinds = append(objs.kinds, tm.Kind)
			objs.add(t, file, tm, doc)
		}
	}
	return objs
}

// add decodes doc, an object of type tm from file, strictly into its API
// type.
func (o *objects) add(t *testing.T, file string, tm metav1.TypeMeta, doc []byte) {
	t.Helper()
	switch tm {
	case metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}:
		obj := strictDecode[corev1.ConfigMap](t, file, doc)
		if strings.HasSuffix(file, "backendtlspolicy.yaml") {
			o.caConfigMaps, o.extras = append(o.caConfigMaps, obj), append(o.extras, obj.ObjectMeta)
			return
		}
		o.configMaps = append(o.configMaps, obj)
	case metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}:
		o.deployments = append(o.deployments, strictDecode[appsv1.Deployment](t, file, doc))
	case metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}:
		o.services = append(o.services, strictDecode[corev1.Service](t, file, doc))
	case metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"}:
		o.claims = append(o.claims, strictDecode[corev1.PersistentVolumeClaim](t, file, doc))
	case metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}:
		o.jobs = append(o.jobs, strictDecode[batchv1.Job](t, file, doc))
	case metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"}:
		obj := strictDecode[autoscalingv2.HorizontalPodAutoscaler](t, file, doc)
		o.hpas, o.extras = append(o.hpas, obj), append(o.extras, obj.ObjectMeta)
	case metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"}:
		obj := strictDecode[policyv1.PodDisruptionBudget](t, file, doc)
		o.pdbs, o.extras = append(o.pdbs, obj), append(o.extras, obj.ObjectMeta)
	case metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"}:
		obj := strictDecode[networkingv1.Ingress](t, file, doc)
		o.ingresses, o.extras = append(o.ingresses, obj), append(o.extras, obj.ObjectMeta)
	case metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"}:
		obj := strictDecode[networkingv1.NetworkPolicy](t, file, doc)
		o.netpols, o.extras = append(o.netpols, obj), append(o.extras, obj.ObjectMeta)
	case metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "HTTPRoute"},
		metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "GRPCRoute"},
		metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "BackendTLSPolicy"},
		metav1.TypeMeta{APIVersion: "monitoring.coreos.com/v1", Kind: "ServiceMonitor"}:
		obj := strictDecode[map[string]any](t, file, doc)
		if o.custom == nil {
			o.custom = map[string][]map[string]any{}
		}
		o.custom[tm.Kind] = append(o.custom[tm.Kind], obj)
		if tm.Kind != "ServiceMonitor" {
			meta := strictDecode[struct {
				metav1.TypeMeta `json:",inline"`
				Metadata        metav1.ObjectMeta `json:"metadata"`
				Spec            map[string]any    `json:"spec"`
			}](t, file, doc)
			o.extras = append(o.extras, meta.Metadata)
		}
	default:
		t.Errorf("%s: unexpected object %s %s", file, tm.APIVersion, tm.Kind)
	}
}

// strictDecode decodes doc as Helm sends it to the API server: YAML to
// JSON without regard to the target type (so that a label 1234 stays a
// number and fails, as it would there), then JSON into T, failing on
// duplicate and unknown fields.
func strictDecode[T any](t *testing.T, file string, doc []byte) T {
	t.Helper()
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		t.Fatalf("%s: %v\n%s", file, err, doc)
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	var obj T
	if err := dec.Decode(&obj); err != nil {
		t.Fatalf("%s: %v\n%s", file, err, doc)
	}
	return obj
}

// strictValues decodes chart values into values.Values, failing on keys
// the struct does not have.
func strictValues(t *testing.T, m map[string]any) *values.Values {
	t.Helper()
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var v values.Values
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("values do not have the shape of values.Values: %v", err)
	}
	return &v
}

// fetched serves every model from generation 0123abcd (see valuesFor).
var fetched = map[string]string{allModels: "0123abcd"}

const allModels = "*"

func valuesFor(t *testing.T, ms *servingv1alpha1.ModelServer, in values.Inputs) *values.Values {
	t.Helper()
	if gen, ok := in.Served[allModels]; ok {
		spec, err := values.Validate(ms)
		if err != nil {
			t.Fatal(err)
		}
		in.Served = map[string]string{}
		for _, m := range spec.Models {
			in.Served[m.Name] = gen
		}
	}
	in.ChartVersion = chartVersion
	in.AppVersion = "2.19.1"
	in.FetchImage = fetchImage
	v, err := values.For(ms, in)
	if err != nil {
		t.Fatalf("values.For: %v", err)
	}
	return v
}

func modelServer(name string, mutate func(*servingv1alpha1.ModelServer)) *servingv1alpha1.ModelServer {
	ms := &servingv1alpha1.ModelServer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: servingv1alpha1.ModelServerSpec{
			Model: &servingv1alpha1.ModelSpec{StorageURI: "s3://models/resnet"},
		},
	}
	if mutate != nil {
		mutate(ms)
	}
	return ms
}

func volume(t *testing.T, ps corev1.PodSpec, name string) corev1.Volume {
	t.Helper()
	for _, v := range ps.Volumes {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("no volume %s", name)
	return corev1.Volume{}
}

func mount(t *testing.T, c corev1.Container, name string) corev1.VolumeMount {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if m.Name == name {
			return m
		}
	}
	t.Fatalf("container %s mounts no %s", c.Name, name)
	return corev1.VolumeMount{}
}

func itoa(i int32) string { return strconv.Itoa(int(i)) }
