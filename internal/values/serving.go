package values

import (
	"fmt"
	"net/url"
	"path"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/fetchcontract"
	"github.com/modelserver-dev/modelserver-operator/internal/names"
	"github.com/modelserver-dev/modelserver-operator/internal/pbtext"
)

// servingImage is the TF Serving image: the spec's, else the official one,
// its GPU build for pods that ask for GPUs.
func servingImage(spec servingv1alpha1.ModelServerSpec) string {
	if spec.Image != "" {
		return spec.Image
	}
	if wantsGPU(spec.Resources) {
		return servingv1alpha1.DefaultImage + "-gpu"
	}
	return servingv1alpha1.DefaultImage
}

// servingValues fills in the Deployment and what scales it.
func servingValues(sp *Spec, v *Values, in Inputs, grpc, rest int32, served []ModelEntry) error {
	spec := sp.ms.Spec
	pt := spec.PodTemplate
	gpu := wantsGPU(spec.Resources)
	image := servingImage(spec)
	pullPolicy := spec.ImagePullPolicy
	if pullPolicy == "" {
		pullPolicy = corev1.PullIfNotPresent
	}
	s := Serving{
		Image:                         image,
		ImagePullPolicy:               pullPolicy,
		Resources:                     spec.Resources,
		Env:                           append(append([]corev1.EnvVar(nil), pt.Env...), in.ProxyEnv...),
		GRPCPort:                      grpc,
		RESTPort:                      rest,
		Tolerations:                   pt.Tolerations,
		PriorityClassName:             pt.PriorityClassName,
		RuntimeClassName:              pt.RuntimeClassName,
		TopologySpreadConstraints:     pt.TopologySpreadConstraints,
		TerminationGracePeriodSeconds: ptr.Deref(pt.TerminationGracePeriodSeconds, 30),
		DrainSeconds:                  ptr.Deref(pt.DrainSeconds, 5),
		LoadTimeoutSeconds:            ptr.Deref(pt.LoadTimeoutSeconds, 600),
	}
	if gpu && !tolerates(s.Tolerations, GPUResource) {
		s.Tolerations = append(slices.Clone(s.Tolerations), corev1.Toleration{
			Key: string(GPUResource), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
		})
	}
	if s.TopologySpreadConstraints == nil {
		s.TopologySpreadConstraints = defaultSpread(v.Labels.Selector, v.Volume)
	}
	if len(served) > 0 {
		s.ReadinessPath = ModelPath(served[0].Name)
	} else {
		s.ReadinessPath = ModelPath(v.Models[0].Name)
	}

	s.Args = []string{
		fmt.Sprintf("--port=%d", grpc),
		fmt.Sprintf("--rest_api_port=%d", rest),
		"--model_config_file=" + path.Join(ConfigMountPath, ModelConfigFile),
		fmt.Sprintf("--model_config_file_poll_wait_seconds=%d", ConfigPollSeconds),
		// A label may name a version still loading; TF Serving otherwise
		// refuses the whole config.
		"--allow_version_labels_for_unavailable_models=true",
	}
	var sizedBatching string
	if b := spec.Batching; b != nil {
		cfg, err := BatchingConfig(b)
		if err != nil {
			return err
		}
		v.ConfigFiles[BatchingConfigFile] = cfg
		if sizedBatching, err = batchThreadsSized(b, spec.Resources); err != nil {
			return err
		}
		s.Args = append(s.Args, "--enable_batching=true", "--batching_parameters_file="+path.Join(ConfigMountPath, BatchingConfigFile))
	}
	monitoring(spec.Monitoring, v, &s, in, rest)
	if s.TLS = servingTLS(spec.TLS, in); s.TLS != nil {
		s.Args = append(s.Args, "--ssl_config_file="+SSLConfigPath)
		// TF Serving reads the certificate only at start: a new one rolls
		// the pods. The controller reads the digest back from the pods
		// when the Secret cannot be read.
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[AnnotationTLSCertDigest] = in.TLSCertDigest
	}
	v.Warnings = append(v.Warnings, extraArgWarnings(spec.ExtraArgs)...)

	own := s.Args
	s.Args = slices.Concat(own, spec.ExtraArgs)
	s.RestartChecksum = restartChecksum(s.Args, v, served)
	threads := threadSizing(spec.ExtraArgs)
	if (threads != nil || sizedBatching != "") && rollsAnyway(in, s.RestartChecksum, &s) {
		if threads != nil {
			s.Args = slices.Concat(own, threads, spec.ExtraArgs)
			s.Env = append(s.Env, cpuLimitEnv())
		}
		if sizedBatching != "" {
			v.ConfigFiles[BatchingConfigFile] = sizedBatching
		}
		s.RestartChecksum = restartChecksum(s.Args, v, served)
	}

	scale(sp, v, &s, in, len(served) > 0)
	v.Serving = s
	return nil
}

// restartChecksum sums what TF Serving reads only when it starts: a
// change must roll the pods. The model config is polled, but a model's
// base path is in the sum too, so that a new generation is loaded by fresh
// pods that are probed ready before the old ones go.
func restartChecksum(args []string, v *Values, served []ModelEntry) string {
	restart := []string{canonical(args), v.ConfigFiles[BatchingConfigFile], v.ConfigFiles[MonitoringConfigFile]}
	for _, m := range served {
		restart = append(restart, m.Name+"="+m.BasePath)
	}
	return names.Hash(restart...)
}

func autoscaling(a *servingv1alpha1.Autoscaling) *Autoscaling {
	hpa := &Autoscaling{MinReplicas: ptr.Deref(a.MinReplicas, 1), MaxReplicas: a.MaxReplicas, Behavior: a.Behavior}
	for _, t := range []struct {
		name   corev1.ResourceName
		target *int32
	}{{corev1.ResourceCPU, a.TargetCPUUtilizationPercentage}, {corev1.ResourceMemory, a.TargetMemoryUtilizationPercentage}} {
		if t.target == nil {
			continue
		}
		hpa.Metrics = append(hpa.Metrics, autoscalingv2.MetricSpec{
			Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricSource{
				Name:   t.name,
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(*t.target)},
			},
		})
	}
	hpa.Metrics = append(hpa.Metrics, a.Metrics...)
	return hpa
}

// defaultSpread prefers spreading the serving pods over zones, and over
// nodes when the model volume can be mounted on several nodes at once (a
// ReadWriteOnce claim attaches to one node, so its pods must share it) or
// each pod has its own copy. Preferences only: a small cluster still runs
// every pod.
func defaultSpread(selector map[string]string, vol Volume) []corev1.TopologySpreadConstraint {
	keys := []string{corev1.LabelTopologyZone}
	if vol.PerPod || vol.Create && vol.AccessMode == string(corev1.ReadWriteMany) {
		keys = append(keys, corev1.LabelHostname)
	}
	var out []corev1.TopologySpreadConstraint
	for _, key := range keys {
		out = append(out, corev1.TopologySpreadConstraint{
			MaxSkew:           1,
			TopologyKey:       key,
			WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector:     &metav1.LabelSelector{MatchLabels: selector},
			// Count only the pods of the same rollout.
			MatchLabelKeys: []string{appsv1.DefaultDeploymentUniqueLabelKey},
		})
	}
	return out
}

func wantsGPU(r corev1.ResourceRequirements) bool {
	q, ok := r.Limits[GPUResource]
	if !ok {
		q, ok = r.Requests[GPUResource]
	}
	return ok && !q.IsZero()
}

func tolerates(ts []corev1.Toleration, key corev1.ResourceName) bool {
	return slices.ContainsFunc(ts, func(t corev1.Toleration) bool {
		return t.Key == string(key) || (t.Key == "" && t.Operator == corev1.TolerationOpExists)
	})
}

// modelWait is the init container that holds the serving pods until the
// fetch manifest of each configured model exists, or nil when no model is
// configured.
func modelWait(in Inputs, configs []ModelEntry) *InitContainer {
	if len(configs) == 0 {
		return nil
	}
	args := []string{"wait-for-model"}
	for _, c := range configs {
		args = append(args, "--file", path.Join(c.BasePath, fetchcontract.ManifestName))
	}
	c := initContainer(in, liveInitContainer(in.LiveServingPod, ModelWaitContainerName), args)
	return &c
}

// initContainer is a serving pods' init container of the operator's image
// running args: the fetcher of this operator's image, unless live, the one
// running, has the same args, whose image and command it keeps, so that
// upgrading the operator restarts no serving pod.
func initContainer(in Inputs, live *InitContainer, args []string) InitContainer {
	prog := in.fetcher()
	if live != nil && live.Image != "" && slices.Equal(live.Args, args) {
		prog = Program{Image: live.Image, Command: live.Command}
	}
	return InitContainer{
		Image:           prog.Image,
		Command:         prog.Command,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Args:            args,
		Resources:       requestsAndMemoryLimit("10m", "16Mi", "64Mi"),
	}
}

// DesiredReplicas is the number of serving pods the spec asks for (the
// Deployment holds fewer while nothing is fetched yet).
func DesiredReplicas(ms *servingv1alpha1.ModelServer) int32 {
	if a := ms.Spec.Autoscaling; a != nil {
		return ptr.Deref(a.MinReplicas, 1)
	}
	return ptr.Deref(ms.Spec.Replicas, 1)
}

// RollUnavailable is how many of a count of serving pods a rollout may
// take down before their replacements are ready: spec.rollout's
// maxUnavailable, a percentage rounded down as the Deployment controller
// rounds it.
func RollUnavailable(ms *servingv1alpha1.ModelServer, pods int32) int32 {
	if ms.Spec.Rollout == nil || ms.Spec.Rollout.MaxUnavailable == nil {
		return 0
	}
	return podCount(*ms.Spec.Rollout.MaxUnavailable, pods, false)
}

// podCount is how many of a count of pods a count or a percentage of
// them is, at most all of them: a percentage rounded up or down as the
// controller that reads it rounds it (the disruption controller up, the
// Deployment controller's maxUnavailable down).
func podCount(v intstr.IntOrString, pods int32, roundUp bool) int32 {
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, int(pods), roundUp)
	if err != nil {
		return 0 // admission refuses what is neither a count nor a percentage
	}
	return int32(min(max(n, 0), int(pods)))
}

// monitoring turns on TF Serving's Prometheus endpoint unless the spec
// turns it off, with a ServiceMonitor where asked and the API exists.
func monitoring(mon servingv1alpha1.Monitoring, v *Values, s *Serving, in Inputs, rest int32) {
	if mon.Enabled != nil && !*mon.Enabled {
		return
	}
	v.Monitoring = Monitoring{Enabled: true, Path: MonitoringPath}
	v.ConfigFiles[MonitoringConfigFile] = "prometheus_config {\n  enable: true\n  path: " + pbtext.Quote(MonitoringPath) + "\n}\n"
	s.Args = append(s.Args, "--monitoring_config_file="+path.Join(ConfigMountPath, MonitoringConfigFile))
	s.Annotations = map[string]string{
		"prometheus.io/scrape": "true",
		"prometheus.io/port":   strconv.Itoa(int(rest)),
		"prometheus.io/path":   MonitoringPath,
	}
	sm := mon.ServiceMonitor
	switch {
	case sm == nil:
	case !in.has(ServiceMonitorKind):
		v.Warnings = append(v.Warnings, "spec.monitoring.serviceMonitor: the cluster has no "+APIKey(ServiceMonitorKind)+" API (install the Prometheus Operator); no ServiceMonitor rendered")
		v.WaitsForAPIs = true
	default:
		interval := sm.Interval
		if interval == "" {
			interval = "30s"
		}
		v.Monitoring.ServiceMonitor = &ServiceMonitor{Interval: interval, Labels: sm.Labels}
	}
}

// scale sets the replicas, the autoscaler and the disruption budget: no
// pods until some model has data (hasData), since pods would only fail
// their probes; then spec.replicas, or the autoscaler's minimum.
func scale(sp *Spec, v *Values, s *Serving, in Inputs, hasData bool) {
	spec := sp.ms.Spec
	desired := sp.DesiredReplicas
	switch {
	case !hasData:
		s.Replicas = 0
	case spec.Autoscaling != nil:
		hpa := autoscaling(spec.Autoscaling)
		v.Autoscaling = hpa
		s.Replicas = hpa.MinReplicas
		if live := ptr.Deref(in.LiveReplicas, 0); live > 0 {
			s.Replicas = live
		}
	default:
		s.Replicas = desired
	}
	s.MaxSurge, s.MaxUnavailable = intstr.FromInt32(1), intstr.FromInt32(0)
	if r := spec.Rollout; r != nil {
		s.MaxSurge = ptr.Deref(r.MaxSurge, s.MaxSurge)
		s.MaxUnavailable = ptr.Deref(r.MaxUnavailable, s.MaxUnavailable)
		if desired > 0 && RollUnavailable(sp.ms, desired) >= desired {
			v.Warnings = append(v.Warnings, fmt.Sprintf("spec.rollout.maxUnavailable: %s of %d serving pods lets a rollout stop them all before a new one is ready: the endpoint is down while the new pods load the model", s.MaxUnavailable.String(), desired))
		}
	}
	maxPods := desired
	if a := spec.Autoscaling; a != nil {
		maxPods = a.MaxReplicas
		v.Warnings = append(v.Warnings, unmeasuredTargets(a, spec.Resources)...)
	}
	if maxPods > 1 {
		// One pod at a time may be evicted by default: node drains
		// proceed, capacity never falls by more than one pod.
		v.Disruption = &Disruption{MaxUnavailable: intstr.FromInt32(1)}
		if d := spec.Disruption; d != nil && d.MaxUnavailable != nil {
			v.Disruption.MaxUnavailable = *d.MaxUnavailable
			fewest := desired
			if a := spec.Autoscaling; a != nil {
				fewest = ptr.Deref(a.MinReplicas, 1)
			}
			// One pod alone may always be evicted, as with the default.
			if fewest > 1 && podCount(*d.MaxUnavailable, fewest, true) >= fewest {
				v.Warnings = append(v.Warnings, fmt.Sprintf("spec.disruption.maxUnavailable: %s of %d serving pods lets node drains evict them all at once: the endpoint is down until new pods have loaded the model", d.MaxUnavailable.String(), fewest))
			}
		}
	}
}

// ModelPath is the REST API's path of the model named name.
func ModelPath(name string) string { return RESTAPIPath + "/models/" + url.PathEscape(name) }
