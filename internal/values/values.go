// Package values turns a ModelServer into the values of the embedded chart.
// It is pure: no I/O, the same inputs always give the same values, and every
// decision about what to render is made here, not in the chart's templates.
package values

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/fetchcontract"
	"github.com/modelserver-dev/modelserver-operator/internal/names"
)

// Labels every child carries besides the app.kubernetes.io/* set. The
// operator's caches select on LabelModelServer, since Helm forces
// app.kubernetes.io/managed-by to "Helm".
const (
	LabelModelServer = "serving.modelserver.dev/modelserver"
	LabelComponent   = "app.kubernetes.io/component"
)

// ComponentFetch is the LabelComponent of the model-fetch Jobs and their
// pods, as the chart's fetch-job.yaml sets it; the operator's cache of
// fetch pods selects on it.
const ComponentFetch = "model-fetch"

// Paths inside the pods.
const (
	ModelsMountPath      = "/models"
	ConfigMountPath      = "/etc/modelserver"
	ModelConfigFile      = "models.config"
	CredentialsMountPath = "/var/run/secrets/modelserver/credentials"
)

// Values are the embedded chart's values. Their JSON form is what the chart
// reads; values.schema.json in the chart describes the same shape.
type Values struct {
	Names  Names   `json:"names"`
	Owner  *Owner  `json:"owner,omitempty"`
	Labels Labels  `json:"labels"`
	Models []Model `json:"models"`
	// Fetches are the model-fetch Jobs, one per distinct fetch generation.
	Fetches []Fetch `json:"fetches"`
	Volume  Volume  `json:"volume"`
	Serving Serving `json:"serving"`
	Service Service `json:"service"`
	Pod     Pod     `json:"pod"`
	// ConfigFiles are the files of the ConfigMap mounted at
	// ConfigMountPath: the model config, and the batching and monitoring
	// configs when those are on.
	ConfigFiles   map[string]string `json:"configFiles"`
	Autoscaling   *Autoscaling      `json:"autoscaling,omitempty"`
	Disruption    *Disruption       `json:"disruption,omitempty"`
	Monitoring    Monitoring        `json:"monitoring"`
	Ingress       *Ingress          `json:"ingress,omitempty"`
	Routes        *Routes           `json:"routes,omitempty"`
	NetworkPolicy *NetworkPolicy    `json:"networkPolicy,omitempty"`

	// Warnings name what the spec asks for that cannot be rendered in
	// this cluster (see Inputs.APIs). They are not chart values.
	Warnings []string `json:"-"`
}

// Names of the rendered objects (see package names). The autoscaler,
// disruption budget, network policy, Ingress, routes and ServiceMonitor
// share the Deployment's name: they are of other kinds.
type Names struct {
	Deployment string `json:"deployment"`
	Service    string `json:"service"`
	ConfigMap  string `json:"configMap"`
	Claim      string `json:"claim"`
}

// Owner is the ModelServer; every rendered object gets it as controlling
// owner reference so that garbage collection and owner watches work even if
// the release record is lost.
type Owner struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	UID        string `json:"uid"`
}

// Labels are added to every object (common), to every pod (pod: common
// less the versions, so that a new chart leaves pod templates alone), and
// to the serving pods' selector (selector ⊂ pod).
type Labels struct {
	Common   map[string]string `json:"common"`
	Pod      map[string]string `json:"pod"`
	Selector map[string]string `json:"selector"`
}

// Model is one model TF Serving serves.
type Model struct {
	Name       string `json:"name"`
	StorageURI string `json:"storageUri"`
	// FetchJob names the Job fetching the model's current generation.
	FetchJob string `json:"fetchJob"`
	// BasePath is the model's directory inside the serving pods: the
	// directory holding the numbered version directories. Empty while the
	// model is left out of the model config (see Inputs.Served).
	BasePath string `json:"basePath,omitempty"`
}

// Fetch is one model-fetch Job.
type Fetch struct {
	// Name of the Job; it changes with the generation.
	Name string `json:"name"`
	// Generation identifies the fetch inputs.
	Generation      string            `json:"generation"`
	Image           string            `json:"image"`
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy"`
	Args            []string          `json:"args"`
	Env             []corev1.EnvVar   `json:"env,omitempty"`
	// PermanentFailureExitCode is the fetcher's exit code for a failure
	// that a retry cannot fix (a missing model, refused credentials).
	PermanentFailureExitCode int32                       `json:"permanentFailureExitCode"`
	CredentialsSecret        string                      `json:"credentialsSecret,omitempty"`
	BackoffLimit             int32                       `json:"backoffLimit"`
	ActiveDeadline           int64                       `json:"activeDeadlineSeconds"`
	Resources                corev1.ResourceRequirements `json:"resources"`
}

// Volume is where the models live: a claim the chart creates, or the
// user's claim for a pvc:// model.
type Volume struct {
	Create           bool   `json:"create"`
	ClaimName        string `json:"claimName"`
	Size             string `json:"size,omitempty"`
	StorageClassName string `json:"storageClassName,omitempty"`
	AccessMode       string `json:"accessMode,omitempty"`
}

// Serving is the TF Serving Deployment.
type Serving struct {
	// Replicas is what the release sets. With an autoscaler it is the
	// live count (minReplicas for a new Deployment): Helm's three-way
	// merge sets every field of the manifest that differs from the live
	// object, so any other number would undo the autoscaler at each
	// upgrade, and leaving the field out would drop a Deployment scaled
	// by spec.replicas to the default of 1 when autoscaling is turned on.
	Replicas        int32                       `json:"replicas"`
	Image           string                      `json:"image"`
	ImagePullPolicy corev1.PullPolicy           `json:"imagePullPolicy"`
	Args            []string                    `json:"args"`
	Resources       corev1.ResourceRequirements `json:"resources"`
	Env             []corev1.EnvVar             `json:"env,omitempty"`
	GRPCPort        int32                       `json:"grpcPort"`
	RESTPort        int32                       `json:"restPort"`
	// ReadinessPath is the REST path the readiness probe asks: the status
	// of the first model served.
	ReadinessPath string `json:"readinessPath"`
	// RestartChecksum changes with what TF Serving reads only at start
	// (flags, batching, the models' base paths), and so rolls the pods.
	// Version policies and labels are not in it: TF Serving picks those up
	// by polling the model config.
	RestartChecksum string `json:"restartChecksum"`
	// Tolerations of the serving pods: the pod's, plus the GPU taint's
	// when the pods ask for GPUs.
	Tolerations                   []corev1.Toleration               `json:"tolerations,omitempty"`
	PriorityClassName             string                            `json:"priorityClassName,omitempty"`
	TopologySpreadConstraints     []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
	TerminationGracePeriodSeconds int64                             `json:"terminationGracePeriodSeconds"`
	DrainSeconds                  int64                             `json:"drainSeconds"`
	Annotations                   map[string]string                 `json:"annotations,omitempty"`
	// ModelWait, when set, is the serving pods' init container that holds
	// them until every model they are configured with is on the volume.
	ModelWait *ModelWait `json:"modelWait,omitempty"`
}

// The chart's names of the fetch Job's container and the serving pods'
// init container, by which the operator finds them in what runs.
const (
	FetchContainerName     = "fetch"
	ModelWaitContainerName = "wait-for-model"
)

// ModelWait is the serving pods' wait-for-model init container: the
// operator's image, waiting until the fetch manifest of each fetched model
// the pods serve exists. It lets the serving pods start together with the
// first fetch instead of after it, so that a new ModelServer needs one Helm
// install and no upgrade; a model already on the volume lets it finish at
// once.
type ModelWait struct {
	Image           string                      `json:"image"`
	ImagePullPolicy corev1.PullPolicy           `json:"imagePullPolicy"`
	Args            []string                    `json:"args"`
	Resources       corev1.ResourceRequirements `json:"resources"`
}

// Service fronts the serving pods.
type Service struct {
	Type        corev1.ServiceType `json:"type"`
	Annotations map[string]string  `json:"annotations,omitempty"`
}

// Pod holds the pod-level settings shared by the serving and fetch pods.
type Pod struct {
	Labels             map[string]string             `json:"labels,omitempty"`
	Annotations        map[string]string             `json:"annotations,omitempty"`
	NodeSelector       map[string]string             `json:"nodeSelector,omitempty"`
	Tolerations        []corev1.Toleration           `json:"tolerations,omitempty"`
	Affinity           *corev1.Affinity              `json:"affinity,omitempty"`
	ServiceAccountName string                        `json:"serviceAccountName,omitempty"`
	ImagePullSecrets   []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
}

// Autoscaling is the HorizontalPodAutoscaler of the Deployment.
type Autoscaling struct {
	MinReplicas int32                                          `json:"minReplicas"`
	MaxReplicas int32                                          `json:"maxReplicas"`
	Metrics     []autoscalingv2.MetricSpec                     `json:"metrics"`
	Behavior    *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
}

// Disruption is the PodDisruptionBudget of the serving pods.
type Disruption struct {
	MaxUnavailable int32 `json:"maxUnavailable"`
}

// Monitoring is TF Serving's Prometheus endpoint.
type Monitoring struct {
	Enabled        bool            `json:"enabled"`
	Path           string          `json:"path,omitempty"`
	ServiceMonitor *ServiceMonitor `json:"serviceMonitor,omitempty"`
}

// ServiceMonitor is the Prometheus Operator's scrape config.
type ServiceMonitor struct {
	Interval string            `json:"interval"`
	Labels   map[string]string `json:"labels,omitempty"`
}

// Ingress routes HTTP to the REST port.
type Ingress struct {
	Host          string            `json:"host"`
	ClassName     string            `json:"className,omitempty"`
	TLSSecretName string            `json:"tlsSecretName,omitempty"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// Routes are Gateway API routes to the Service.
type Routes struct {
	ParentRefs []ParentRef `json:"parentRefs"`
	Hostnames  []string    `json:"hostnames,omitempty"`
	HTTP       bool        `json:"http"`
	GRPC       bool        `json:"grpc"`
}

// ParentRef is a Gateway a route attaches to.
type ParentRef struct {
	Name        string `json:"name"`
	Namespace   string `json:"namespace,omitempty"`
	SectionName string `json:"sectionName,omitempty"`
}

// NetworkPolicy admits traffic to the serving ports from these namespaces
// (the ModelServer's own included).
type NetworkPolicy struct {
	Namespaces []string `json:"namespaces"`
}

// Inputs are what the values depend on besides the ModelServer's spec.
type Inputs struct {
	// ChartVersion and AppVersion of the embedded chart, for labels.
	ChartVersion, AppVersion string
	// FetchImage is the operator's own image, which runs `manager fetch`
	// in new fetch Jobs and waits for the model in new serving pods.
	FetchImage string
	// JobImages maps a fetch generation whose Job exists to the image it
	// runs: a Job's pod template cannot change, and after an operator
	// upgrade the release must still render the Jobs as they are.
	JobImages map[string]string
	// LiveModelWait is the wait-for-model init container of the serving
	// Deployment, nil if there is none. While its arguments stay the same
	// it keeps its image, so that upgrading the operator restarts no
	// serving pod.
	LiveModelWait *ModelWait
	// Served maps a model's name to the fetch generation it is served
	// from: the newest one that succeeded. A model of spec.models missing
	// from it has no data yet and is left out of the model config; the
	// serving pods stay at zero replicas until some model has data. The
	// model of spec.model missing from it is served from the generation
	// being fetched, its pods waiting for the data (ModelWait), unless
	// that fetch failed (FailedFetches).
	Served map[string]string
	// FailedFetches holds the models whose current fetch failed.
	FailedFetches map[string]bool
	// ProxyEnv is the operator's HTTP(S)_PROXY/NO_PROXY, passed on to the
	// serving and fetch containers.
	ProxyEnv []corev1.EnvVar
	// LiveReplicas is the serving Deployment's replica count, nil if it
	// does not exist.
	LiveReplicas *int32
	// APIs says, by APIKey, whether the optional kinds the spec asks for
	// (Gateway API routes, ServiceMonitor) exist in the cluster. A kind
	// that does not is left out, with a warning.
	APIs map[string]bool
}

// The optional kinds, rendered only where their API is installed.
var (
	HTTPRouteKind      = schema.GroupVersionKind{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "HTTPRoute"}
	GRPCRouteKind      = schema.GroupVersionKind{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "GRPCRoute"}
	ServiceMonitorKind = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}
)

// APIKey is a kind's key in Inputs.APIs.
func APIKey(gvk schema.GroupVersionKind) string { return gvk.GroupVersion().String() + "/" + gvk.Kind }

func (in Inputs) has(gvk schema.GroupVersionKind) bool { return in.APIs[APIKey(gvk)] }

// jobImage is the image of a fetch generation's Job: the one it runs if it
// exists.
func (in Inputs) jobImage(generation string) string {
	if image := in.JobImages[generation]; image != "" {
		return image
	}
	return in.FetchImage
}

// Error names the spec field that cannot be turned into values.
type Error struct {
	Field  string
	Reason string
}

func (e *Error) Error() string { return e.Field + ": " + e.Reason }

// GPUResource is the extended resource of NVIDIA's device plugin.
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// MonitoringPath is where TF Serving serves Prometheus metrics, on the
// REST port.
const MonitoringPath = "/monitoring/prometheus/metrics"

// Files of the serving ConfigMap.
const (
	BatchingConfigFile   = "batching.config"
	MonitoringConfigFile = "monitoring.config"
)

// For builds the chart values of ms. A spec the CRD schema admits always
// gives values; an *Error names the field otherwise.
func For(ms *servingv1alpha1.ModelServer, in Inputs) (*Values, error) {
	spec := ms.Spec
	if len(ms.Name) > servingv1alpha1.MaxNameLength {
		return nil, &Error{"metadata.name", fmt.Sprintf("must be at most %d characters", servingv1alpha1.MaxNameLength)}
	}
	models, field, err := Models(ms)
	if err != nil {
		return nil, err
	}
	if err := checkUTF8(ms, models, field); err != nil {
		return nil, err
	}
	grpc, rest := portOr(spec.Ports.GRPC, 8500), portOr(spec.Ports.REST, 8501)
	if grpc == rest {
		return nil, &Error{"spec.ports", "grpc and rest must differ"}
	}

	v := &Values{
		Names: Names{
			Deployment: names.Deployment(ms.Name),
			Service:    names.Service(ms.Name),
			ConfigMap:  names.ConfigMap(ms.Name),
			Claim:      names.Claim(ms.Name),
		},
		Labels:      labels(ms.Name, in.ChartVersion, in.AppVersion),
		ConfigFiles: map[string]string{},
	}
	if ms.UID != "" {
		v.Owner = &Owner{
			APIVersion: servingv1alpha1.GroupVersion.String(),
			Kind:       "ModelServer",
			Name:       ms.Name,
			UID:        string(ms.UID),
		}
	}

	// The model volume: the user's claim for pvc:// (mounted as it is, the
	// path inside it being the model), else a claim of our own where each
	// generation is fetched into a directory of its own, so that serving
	// pods keep the previous model until the new one is complete.
	claim, sub, isPVC := parsePVC(models[0].StorageURI)
	if isPVC {
		v.Volume = Volume{Create: false, ClaimName: claim}
	} else {
		v.Volume = Volume{
			Create:     true,
			ClaimName:  v.Names.Claim,
			Size:       "10Gi",
			AccessMode: string(corev1.ReadWriteOnce),
		}
		if spec.Storage.Size != nil {
			v.Volume.Size = spec.Storage.Size.String()
		}
		if spec.Storage.StorageClassName != nil {
			v.Volume.StorageClassName = *spec.Storage.StorageClassName
		}
		if spec.Storage.AccessMode != "" {
			v.Volume.AccessMode = string(spec.Storage.AccessMode)
		}
	}

	var configs []ModelEntry
	for i, m := range models {
		generation := FetchGeneration(ms, m)
		jobName := names.FetchJob(ms.Name, generation)
		dest := path.Join(ModelsMountPath, generation)
		if isPVC {
			dest = path.Join(ModelsMountPath, path.Clean("/"+sub))
		}
		model := Model{Name: m.Name, StorageURI: m.StorageURI, FetchJob: jobName}
		served, ok := in.Served[m.Name]
		if !ok && field == "spec.model" && !in.FailedFetches[m.Name] {
			// The first fetch of the one model: the pods start with it and
			// wait for its data, so that the fetch ending changes no value
			// and costs no upgrade. Several models keep the gate: one
			// fetched later joins pods that already serve the others, and
			// TF Serving does not take a model config naming a path that
			// does not exist yet.
			served, ok = generation, true
		}
		if ok {
			model.BasePath = path.Join(ModelsMountPath, served)
			if isPVC {
				model.BasePath = dest
			}
			configs = append(configs, ModelEntry{Name: m.Name, BasePath: model.BasePath, Policy: m.VersionPolicy, Labels: m.VersionLabels,
				Field: ModelField(ms, i)})
		}
		v.Models = append(v.Models, model)
		if !slices.ContainsFunc(v.Fetches, func(f Fetch) bool { return f.Generation == generation }) {
			v.Fetches = append(v.Fetches, Fetch{
				Name:                     jobName,
				Generation:               generation,
				Image:                    in.jobImage(generation),
				ImagePullPolicy:          corev1.PullIfNotPresent,
				Args:                     fetchArgs(m, dest),
				Env:                      in.ProxyEnv,
				PermanentFailureExitCode: fetchcontract.PermanentFailureExitCode,
				CredentialsSecret:        m.CredentialsSecret,
				BackoffLimit:             2,
				ActiveDeadline:           3600,
				Resources:                fetchResources(),
			})
		}
	}
	config, err := ModelConfig(configs)
	if err != nil {
		return nil, err
	}
	v.ConfigFiles[ModelConfigFile] = config

	if err := servingValues(ms, v, in, grpc, rest, configs); err != nil {
		return nil, err
	}
	if !isPVC {
		// A pvc:// model is the user's data, there before the pods are.
		v.Serving.ModelWait = modelWait(in, configs)
	}
	svcType := spec.Service.Type
	if svcType == "" {
		svcType = corev1.ServiceTypeClusterIP
	}
	v.Service = Service{Type: svcType, Annotations: spec.Service.Annotations}
	pt := spec.PodTemplate
	v.Pod = Pod{
		Labels:             pt.Labels,
		Annotations:        pt.Annotations,
		NodeSelector:       pt.NodeSelector,
		Tolerations:        pt.Tolerations,
		Affinity:           pt.Affinity,
		ServiceAccountName: pt.ServiceAccountName,
		ImagePullSecrets:   pt.ImagePullSecrets,
	}
	if err := checkPodTemplate(pt); err != nil {
		return nil, err
	}
	for k := range pt.Labels {
		_, common := v.Labels.Common[k]
		_, selector := v.Labels.Selector[k]
		if common || selector {
			return nil, &Error{"spec.podTemplate.labels", fmt.Sprintf("%q is set by the operator", k)}
		}
	}
	exposure(ms, v, in)
	return v, nil
}

// Models are the models ms serves, with their names defaulted, and the
// spec field they come from (spec.model or spec.models).
func Models(ms *servingv1alpha1.ModelServer) ([]servingv1alpha1.ModelSpec, string, error) {
	spec := ms.Spec
	switch {
	case spec.Model != nil && len(spec.Models) > 0:
		return nil, "", &Error{"spec", "set one of spec.model and spec.models, not both"}
	case spec.Model != nil:
		m := *spec.Model
		if m.Name == "" {
			m.Name = ms.Name
		}
		if m.StorageURI == "" {
			return nil, "", &Error{"spec.model.storageUri", "is required"}
		}
		return []servingv1alpha1.ModelSpec{m}, "spec.model", nil
	case len(spec.Models) > 0:
		seen := map[string]bool{}
		for i, m := range spec.Models {
			field := ModelField(ms, i)
			switch {
			case m.Name == "":
				return nil, "", &Error{field + ".name", "is required when serving several models"}
			case seen[m.Name]:
				return nil, "", &Error{field + ".name", fmt.Sprintf("%q is used by another model", m.Name)}
			case m.StorageURI == "":
				return nil, "", &Error{field + ".storageUri", "is required"}
			case strings.HasPrefix(m.StorageURI, "pvc://"):
				return nil, "", &Error{field + ".storageUri", "pvc:// models are supported in spec.model only"}
			}
			seen[m.Name] = true
		}
		return spec.Models, "spec.models", nil
	}
	return nil, "", &Error{"spec.model", "is required (or spec.models)"}
}

// ModelField names the spec field of the i-th model: spec.model, or
// spec.models[i].
func ModelField(ms *servingv1alpha1.ModelServer, i int) string {
	if len(ms.Spec.Models) == 0 {
		return "spec.model"
	}
	return fmt.Sprintf("spec.models[%d]", i)
}

// servingValues fills in the Deployment and what scales it.
func servingValues(ms *servingv1alpha1.ModelServer, v *Values, in Inputs, grpc, rest int32, served []ModelEntry) error {
	spec := ms.Spec
	pt := spec.PodTemplate
	gpu := wantsGPU(spec.Resources)
	image := spec.Image
	if image == "" {
		image = servingv1alpha1.DefaultImage
		if gpu {
			image += "-gpu"
		}
	}
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
		TopologySpreadConstraints:     pt.TopologySpreadConstraints,
		TerminationGracePeriodSeconds: ptr.Deref(pt.TerminationGracePeriodSeconds, 30),
		DrainSeconds:                  ptr.Deref(pt.DrainSeconds, 5),
	}
	if s.DrainSeconds >= s.TerminationGracePeriodSeconds {
		return &Error{"spec.podTemplate.drainSeconds", "must be less than terminationGracePeriodSeconds"}
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
		s.ReadinessPath = "/v1/models/" + url.PathEscape(served[0].Name)
	} else {
		s.ReadinessPath = "/v1/models/" + url.PathEscape(v.Models[0].Name)
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
	if b := spec.Batching; b != nil {
		cfg, err := BatchingConfig(b)
		if err != nil {
			return err
		}
		v.ConfigFiles[BatchingConfigFile] = cfg
		s.Args = append(s.Args, "--enable_batching=true", "--batching_parameters_file="+path.Join(ConfigMountPath, BatchingConfigFile))
	}
	mon := spec.Monitoring
	if mon.Enabled == nil || *mon.Enabled {
		v.Monitoring = Monitoring{Enabled: true, Path: MonitoringPath}
		v.ConfigFiles[MonitoringConfigFile] = "prometheus_config {\n  enable: true\n  path: " + quoteText(MonitoringPath) + "\n}\n"
		s.Args = append(s.Args, "--monitoring_config_file="+path.Join(ConfigMountPath, MonitoringConfigFile))
		s.Annotations = map[string]string{
			"prometheus.io/scrape": "true",
			"prometheus.io/port":   strconv.Itoa(int(rest)),
			"prometheus.io/path":   MonitoringPath,
		}
		if sm := mon.ServiceMonitor; sm != nil && !in.has(ServiceMonitorKind) {
			v.Warnings = append(v.Warnings, "spec.monitoring.serviceMonitor: the cluster has no "+APIKey(ServiceMonitorKind)+" API (install the Prometheus Operator); no ServiceMonitor rendered")
		} else if sm != nil {
			interval := sm.Interval
			if interval == "" {
				interval = "30s"
			}
			v.Monitoring.ServiceMonitor = &ServiceMonitor{Interval: interval, Labels: sm.Labels}
		}
	} else if mon.ServiceMonitor != nil {
		return &Error{"spec.monitoring.serviceMonitor", "needs spec.monitoring.enabled"}
	}

	// What TF Serving reads only when it starts: a change must roll the
	// pods. The model config is polled, but a model's base path is in the
	// key too, so that a new generation is loaded by fresh pods that are
	// probed ready before the old ones go.
	restart := []string{canonical(s.Args), v.ConfigFiles[BatchingConfigFile], v.ConfigFiles[MonitoringConfigFile]}
	for _, m := range served {
		restart = append(restart, m.Name+"="+m.BasePath)
	}
	s.RestartChecksum = names.Hash(restart...)

	// Replicas: none until some model has data, since pods would only fail
	// their probes; then spec.replicas, or the autoscaler's minimum.
	desired := DesiredReplicas(ms)
	if desired < 0 {
		return &Error{"spec.replicas", "must not be negative"}
	}
	if a := spec.Autoscaling; a != nil && spec.Replicas != nil {
		return &Error{"spec.replicas", "must not be set together with spec.autoscaling"}
	}
	switch {
	case len(served) == 0:
		s.Replicas = 0
	case spec.Autoscaling != nil:
		hpa, err := autoscaling(spec.Autoscaling)
		if err != nil {
			return err
		}
		v.Autoscaling = hpa
		s.Replicas = hpa.MinReplicas
		if live := ptr.Deref(in.LiveReplicas, 0); live > 0 {
			s.Replicas = live
		}
	default:
		s.Replicas = desired
	}
	maxPods := desired
	if a := spec.Autoscaling; a != nil {
		maxPods = a.MaxReplicas
	}
	if maxPods > 1 {
		// One pod at a time may be evicted: node drains proceed, capacity
		// never falls by more than one pod.
		v.Disruption = &Disruption{MaxUnavailable: 1}
	}
	v.Serving = s
	return nil
}

// ConfigPollSeconds is --model_config_file_poll_wait_seconds: how often TF
// Serving re-reads the model config, and so how soon a new version policy
// or label takes effect.
const ConfigPollSeconds = 30

func autoscaling(a *servingv1alpha1.Autoscaling) (*Autoscaling, error) {
	hpa := &Autoscaling{MinReplicas: ptr.Deref(a.MinReplicas, 1), MaxReplicas: a.MaxReplicas, Behavior: a.Behavior}
	if hpa.MinReplicas > hpa.MaxReplicas {
		return nil, &Error{"spec.autoscaling.minReplicas", "must not exceed maxReplicas"}
	}
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
	if len(hpa.Metrics) == 0 {
		return nil, &Error{"spec.autoscaling", "needs targetCPUUtilizationPercentage or targetMemoryUtilizationPercentage"}
	}
	return hpa, nil
}

// defaultSpread prefers spreading the serving pods over zones, and over
// nodes when the model volume can be mounted on several nodes at once (a
// ReadWriteOnce claim attaches to one node, so its pods must share it).
// Preferences only: a small cluster still runs every pod.
func defaultSpread(selector map[string]string, vol Volume) []corev1.TopologySpreadConstraint {
	keys := []string{corev1.LabelTopologyZone}
	if vol.Create && vol.AccessMode == string(corev1.ReadWriteMany) {
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

// exposure fills in the Ingress, routes and network policy.
func exposure(ms *servingv1alpha1.ModelServer, v *Values, in Inputs) {
	spec := ms.Spec
	if i := spec.Ingress; i != nil {
		v.Ingress = &Ingress{Host: i.Host, ClassName: i.ClassName, TLSSecretName: i.TLSSecretName, Annotations: i.Annotations}
	}
	if g := spec.Gateway; g != nil {
		r := &Routes{Hostnames: g.Hostnames, HTTP: g.REST == nil || *g.REST, GRPC: g.GRPC == nil || *g.GRPC}
		for _, route := range []struct {
			on   *bool
			kind schema.GroupVersionKind
		}{{&r.HTTP, HTTPRouteKind}, {&r.GRPC, GRPCRouteKind}} {
			if *route.on && !in.has(route.kind) {
				*route.on = false
				v.Warnings = append(v.Warnings, "spec.gateway: the cluster has no "+APIKey(route.kind)+" API (install the Gateway API); no "+route.kind.Kind+" rendered")
			}
		}
		for _, p := range g.ParentRefs {
			r.ParentRefs = append(r.ParentRefs, ParentRef{Name: p.Name, Namespace: p.Namespace, SectionName: p.SectionName})
		}
		if r.HTTP || r.GRPC {
			v.Routes = r
		}
	}
	if np := spec.NetworkPolicy; np != nil {
		ns := append([]string{ms.Namespace}, np.AllowedNamespaces...)
		slices.Sort(ns)
		v.NetworkPolicy = &NetworkPolicy{Namespaces: slices.Compact(ns)}
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

// FetchGeneration is a digest of everything the fetch Job's pod is made
// of but the operator's image. A Job's pod template is immutable, so a
// change to any of it needs a new Job, and a new Job means the model is
// fetched again. The image is left out so that upgrading the operator
// fetches nothing again: a Job keeps the image it was made with
// (Inputs.JobImages).
//
// Two models with the same fetch inputs share a generation, and so one Job
// and one copy of the data.
func FetchGeneration(ms *servingv1alpha1.ModelServer, m servingv1alpha1.ModelSpec) string {
	pt := ms.Spec.PodTemplate
	parts := []string{
		fetchTemplateRevision,
		m.StorageURI,
		m.CredentialsSecret,
		canonical(m.MaxSizeBytes),
		pt.ServiceAccountName,
		canonical(pt.Labels),
		canonical(pt.Annotations),
		canonical(pt.NodeSelector),
		canonical(pt.Tolerations),
		canonical(pt.Affinity),
		canonical(pt.ImagePullSecrets),
	}
	if ms.Spec.Storage.StorageClassName != nil {
		parts = append(parts, *ms.Spec.Storage.StorageClassName)
	}
	return names.Hash(parts...)
}

// fetchTemplateRevision is part of every fetch generation. Bump it with any
// change to the chart's fetch Job template that changes the rendered pod
// template: a Job's pod template is immutable, so such a chart needs new
// Job names (and fetches each model again).
const fetchTemplateRevision = "1"

// Digest is the digest of a chart version and values: equal digests mean a
// Helm upgrade would change nothing the operator decides. It is 40 hex
// digits (160 bits of SHA-256), short enough to be a label value on the
// release record. An autoscaled replica count is left out: the autoscaler
// changing it is no reason to upgrade.
func Digest(chartVersion string, v *Values) string {
	if v.Autoscaling != nil {
		c := *v
		c.Serving.Replicas = 0
		v = &c
	}
	h := sha256.New()
	h.Write([]byte(chartVersion))
	h.Write([]byte{0})
	h.Write([]byte(canonical(v)))
	return hex.EncodeToString(h.Sum(nil))[:40]
}

// Map returns the values in the form Helm takes.
func (v *Values) Map() (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	return m, nil
}

func labels(ms, chartVersion, appVersion string) Labels {
	selector := map[string]string{
		"app.kubernetes.io/name":     "modelserver",
		"app.kubernetes.io/instance": ms,
		LabelComponent:               "serving",
	}
	common := map[string]string{
		"app.kubernetes.io/name":       "modelserver",
		"app.kubernetes.io/instance":   ms,
		"app.kubernetes.io/part-of":    "modelserver-operator",
		"app.kubernetes.io/version":    appVersion,
		"helm.sh/chart":                "modelserver-" + chartVersion,
		LabelModelServer:               ms,
		"app.kubernetes.io/managed-by": "Helm",
	}
	pod := map[string]string{}
	for k, v := range common {
		if k != "app.kubernetes.io/version" && k != "helm.sh/chart" {
			pod[k] = v
		}
	}
	return Labels{Common: common, Pod: pod, Selector: selector}
}

func fetchArgs(m servingv1alpha1.ModelSpec, dest string) []string {
	args := []string{"fetch", "--uri", m.StorageURI, "--dest", dest}
	if m.CredentialsSecret != "" {
		args = append(args, "--credentials-dir", CredentialsMountPath)
	}
	if m.MaxSizeBytes != nil {
		args = append(args, "--max-bytes", strconv.FormatInt(*m.MaxSizeBytes, 10))
	}
	return args
}

// modelWait is the init container that holds the serving pods until the
// fetch manifest of each configured model exists, or nil when no model is
// configured.
func modelWait(in Inputs, configs []ModelEntry) *ModelWait {
	if len(configs) == 0 {
		return nil
	}
	args := []string{"wait-for-model"}
	for _, c := range configs {
		args = append(args, "--file", path.Join(c.BasePath, fetchcontract.ManifestName))
	}
	image := in.FetchImage
	if live := in.LiveModelWait; live != nil && live.Image != "" && slices.Equal(live.Args, args) {
		image = live.Image
	}
	return &ModelWait{
		Image:           image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Args:            args,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("10m"),
				corev1.ResourceMemory: resource.MustParse("16Mi"),
			},
			Limits: corev1.ResourceList{
				corev1.ResourceMemory: resource.MustParse("64Mi"),
			},
		},
	}
}

func fetchResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("100m"),
			corev1.ResourceMemory: resource.MustParse("128Mi"),
		},
		Limits: corev1.ResourceList{
			corev1.ResourceMemory: resource.MustParse("512Mi"),
		},
	}
}

// parsePVC splits pvc://claim/path.
func parsePVC(uri string) (claim, sub string, ok bool) {
	rest, isPVC := strings.CutPrefix(uri, "pvc://")
	if !isPVC {
		return "", "", false
	}
	claim, sub, _ = strings.Cut(rest, "/")
	return claim, sub, claim != ""
}

func portOr(p, def int32) int32 {
	if p == 0 {
		return def
	}
	return p
}

// canonical is a stable text form of v for hashing: JSON with map keys
// sorted (encoding/json sorts them).
func canonical(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		// Only channels, funcs and cycles fail to marshal; none are here.
		panic(fmt.Sprintf("values: marshal %T: %v", v, err))
	}
	return string(raw)
}

// checkPodTemplate refuses pod labels, annotations, node selectors and
// environment variables the apiserver would refuse on the pods. The CRD
// schema cannot say it, and Helm would otherwise create part of the
// release before the Deployment is refused.
func checkPodTemplate(pt servingv1alpha1.PodTemplate) error {
	for _, m := range []struct {
		field string
		kv    map[string]string
	}{{"spec.podTemplate.labels", pt.Labels}, {"spec.podTemplate.nodeSelector", pt.NodeSelector}} {
		if errs := metav1validation.ValidateLabels(m.kv, field.NewPath(m.field)); len(errs) > 0 {
			return &Error{m.field, firstError(errs)}
		}
	}
	if errs := apivalidation.ValidateAnnotations(pt.Annotations, field.NewPath("spec.podTemplate.annotations")); len(errs) > 0 {
		return &Error{"spec.podTemplate.annotations", firstError(errs)}
	}
	for i, e := range pt.Env {
		if msgs := validation.IsEnvVarName(e.Name); len(msgs) > 0 {
			return &Error{fmt.Sprintf("spec.podTemplate.env[%d].name", i), fmt.Sprintf("%.100q: %s", e.Name, msgs[0])}
		}
	}
	return nil
}

// firstError is the first of errs, with the field path left out (the
// Error names it) and the value cut short.
func firstError(errs field.ErrorList) string {
	e := errs[0]
	msg := e.Type.String()
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if s, ok := e.BadValue.(string); ok && s != "" {
		msg = fmt.Sprintf("%.100q: %s", s, msg)
	}
	if len(errs) > 1 {
		msg += fmt.Sprintf(" (and %d more)", len(errs)-1)
	}
	return msg
}

// checkUTF8 refuses strings that are not UTF-8 in the fields that reach
// the manifests: JSON, and so the apiserver, would silently replace their
// bytes, and what ran would not be what the spec says.
func checkUTF8(ms *servingv1alpha1.ModelServer, models []servingv1alpha1.ModelSpec, modelsField string) error {
	type check struct{ field, value string }
	spec := ms.Spec
	fields := []check{
		{"spec.image", spec.Image},
		{"spec.podTemplate.serviceAccountName", spec.PodTemplate.ServiceAccountName},
	}
	for i, m := range models {
		f := modelsField
		if modelsField == "spec.models" {
			f = fmt.Sprintf("spec.models[%d]", i)
		}
		fields = append(fields, check{f + ".name", m.Name}, check{f + ".storageUri", m.StorageURI},
			check{f + ".credentialsSecret", m.CredentialsSecret})
	}
	for k, v := range spec.PodTemplate.Annotations {
		fields = append(fields, check{"spec.podTemplate.annotations", k + v})
	}
	for i, e := range spec.PodTemplate.Env {
		fields = append(fields, check{fmt.Sprintf("spec.podTemplate.env[%d]", i), e.Name + e.Value})
	}
	for _, f := range fields {
		if !utf8.ValidString(f.value) {
			return &Error{f.field, "must be valid UTF-8"}
		}
	}
	return nil
}
