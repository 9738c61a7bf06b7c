package values

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Labels every child carries besides the app.kubernetes.io/* set. The
// operator's caches select on LabelModelServer, since Helm forces
// app.kubernetes.io/managed-by to "Helm".
const (
	LabelModelServer = "serving.modelserver.dev/modelserver"
	LabelComponent   = "app.kubernetes.io/component"
	// AnnotationTLSCertDigest, on the serving pods, is the digest of the
	// certificates they serve (Inputs.TLSCertDigest).
	AnnotationTLSCertDigest = "serving.modelserver.dev/tls-cert-digest"
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
	// CredentialsVolume is the fetch pod's volume of the credentials
	// Secret, as the chart's fetch-job.yaml names it.
	CredentialsVolume = "credentials"
	// PullSecretsMountPath holds an oci:// model's image pull secrets, a
	// directory each (see Fetch.PullSecrets).
	PullSecretsMountPath = "/var/run/secrets/modelserver/pull-secrets"
	// WebIdentityTokenPath is the pods' service account token that a
	// fetch exchanges for a role's credentials (s3://) or a federated
	// token (gs://) (spec.model.webIdentity), projected by the kubelet,
	// which renews it.
	WebIdentityTokenPath = "/var/run/secrets/modelserver/web-identity/token"
	// TLSSecretMountPath is where spec.tls's Secret is mounted, in the
	// tls-config init container alone; SSLConfigPath is the SSL config it
	// writes there for TF Serving, in a memory-backed volume.
	TLSSecretMountPath = "/etc/modelserver-tls"
	// TLSClientCAMountPath is where spec.tls.clientCA's key is mounted,
	// as ca.crt, in the tls-config init container alone.
	TLSClientCAMountPath = "/etc/modelserver-tls-client-ca"
	SSLConfigDir         = "/run/modelserver-tls"
	SSLConfigPath        = SSLConfigDir + "/ssl.config"
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
	BackendTLS    *BackendTLS       `json:"backendTLS,omitempty"`
	NetworkPolicy *NetworkPolicy    `json:"networkPolicy,omitempty"`

	// Warnings name what the spec asks for that cannot be rendered in
	// this cluster (see Inputs.APIs), or that the server would ignore.
	// They are not chart values.
	Warnings []string `json:"-"`
	// WaitsForAPIs says that some of the Warnings are of APIs missing
	// from the cluster, which nothing watched tells of when they come.
	WaitsForAPIs bool `json:"-"`
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
	// Command is nil for a Job made before the image had the fetcher: it
	// runs the image's entrypoint, the manager, with the same Args.
	Command []string        `json:"command,omitempty"`
	Args    []string        `json:"args"`
	Env     []corev1.EnvVar `json:"env,omitempty"`
	// NodeSelector adds to the pod's: the serving pods' architecture
	// (archSelector) in a Job made since the operator added it.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// PermanentFailureExitCode is the fetcher's exit code for a failure
	// that a retry cannot fix (a missing model, refused credentials).
	PermanentFailureExitCode int32  `json:"permanentFailureExitCode"`
	CredentialsSecret        string `json:"credentialsSecret,omitempty"`
	// WebIdentityAudience is the audience of the service account token
	// projected at WebIdentityTokenPath; "" for none (see
	// spec.model.webIdentity).
	WebIdentityAudience string `json:"webIdentityAudience,omitempty"`
	// PullSecrets are image pull secrets whose registry credentials an
	// oci:// model's fetch reads (see pullSecrets).
	PullSecrets []string `json:"pullSecrets,omitempty"`
	// ReadsModelConfig says the Job mounts the serving pods' model config
	// (at ConfigMountPath) and removes, before it downloads, the models of
	// earlier generations the config has moved the pods off: a Job made
	// since the fetch prunes the model volume (LiveJob.ReadsModelConfig).
	ReadsModelConfig bool                        `json:"readsModelConfig,omitempty"`
	BackoffLimit     int32                       `json:"backoffLimit"`
	ActiveDeadline   int64                       `json:"activeDeadlineSeconds"`
	Resources        corev1.ResourceRequirements `json:"resources"`
}

// Volume is where the models live: a claim the chart creates, the user's
// claim for a pvc:// model, or, in storage mode PerPod, a volume of each
// pod's own (an emptyDir of Size, or an ephemeral claim of
// StorageClassName) and of each fetch Job's.
type Volume struct {
	Create           bool   `json:"create"`
	PerPod           bool   `json:"perPod,omitempty"`
	ClaimName        string `json:"claimName,omitempty"`
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
	Replicas int32 `json:"replicas"`
	// MaxSurge and MaxUnavailable are the rolling update's (spec.rollout),
	// a count of pods or a percentage.
	MaxSurge        intstr.IntOrString          `json:"maxSurge"`
	MaxUnavailable  intstr.IntOrString          `json:"maxUnavailable"`
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
	// NodeSelector adds to the pod's: the image's architecture, when the
	// operator knows it and the pod does not choose one (archSelector).
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations of the serving pods: the pod's, plus the GPU taint's
	// when the pods ask for GPUs.
	Tolerations                   []corev1.Toleration               `json:"tolerations,omitempty"`
	PriorityClassName             string                            `json:"priorityClassName,omitempty"`
	RuntimeClassName              string                            `json:"runtimeClassName,omitempty"`
	TopologySpreadConstraints     []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
	TerminationGracePeriodSeconds int64                             `json:"terminationGracePeriodSeconds"`
	DrainSeconds                  int64                             `json:"drainSeconds"`
	// LoadTimeoutSeconds is the startup probe's budget: the probe checks
	// the REST port once a second, so that a pod is Ready within a second
	// of its model's load, and fails after this many checks.
	LoadTimeoutSeconds int64             `json:"loadTimeoutSeconds"`
	Annotations        map[string]string `json:"annotations,omitempty"`
	// ModelWait, when set, is the serving pods' init container that holds
	// them until every model they are configured with is on the volume.
	ModelWait *InitContainer `json:"modelWait,omitempty"`
	// ModelFetches, in storage mode PerPod, are the init containers that
	// fetch each served model into the pod's own volume, and FetchVolumes
	// the volumes of their own (credentials, tokens, pull secrets).
	ModelFetches []PodFetch      `json:"modelFetches,omitempty"`
	FetchVolumes []corev1.Volume `json:"fetchVolumes,omitempty"`
	// TLS, when set, serves the gRPC API over TLS (spec.tls).
	TLS *ServingTLS `json:"tls,omitempty"`
}

// ServingTLS is the gRPC API's TLS: spec.tls's Secret, mounted in the
// tls-config init container alone, which writes TF Serving's SSL config
// (SSLConfigPath) for the server to read at start.
type ServingTLS struct {
	SecretName string `json:"secretName"`
	// ClientCA is spec.tls.clientCA, mounted beside the Secret; nil where
	// the Secret's ca.crt is the clients' CA, or none is asked for.
	ClientCA *ClientCA     `json:"clientCA,omitempty"`
	Config   InitContainer `json:"config"`
}

// ClientCA is the ConfigMap or the Secret, one of the two names set, whose
// Key holds the CAs of the clients' certificates.
type ClientCA struct {
	ConfigMapName string `json:"configMapName,omitempty"`
	SecretName    string `json:"secretName,omitempty"`
	Key           string `json:"key"`
}

// The chart's names of the fetch Job's container and the serving pods'
// init container, by which the operator finds them in what runs.
const (
	FetchContainerName     = "fetch"
	ModelWaitContainerName = "wait-for-model"
	TLSConfigContainerName = "tls-config"
)

// TLSClientCAVolumeName is the chart's name of the serving pods' volume
// of spec.tls.clientCA, by which the operator finds what the pods running
// were made with.
const TLSClientCAVolumeName = "tls-client-ca"

// InitContainer is an init container of the serving pods that runs the
// operator's image. The wait-for-model one waits until the fetch manifest
// of each fetched model the pods serve exists: it lets the serving pods
// start together with the first fetch instead of after it, so that a new
// ModelServer needs one Helm install and no upgrade; a model already on
// the volume lets it finish at once. The tls-config one writes TF
// Serving's SSL config.
type InitContainer struct {
	Image           string            `json:"image"`
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy"`
	// Command is nil in pods made before the image had the fetcher (see
	// Fetch.Command).
	Command   []string                    `json:"command,omitempty"`
	Args      []string                    `json:"args"`
	Resources corev1.ResourceRequirements `json:"resources"`
}

// Service fronts the serving pods.
type Service struct {
	Type        corev1.ServiceType `json:"type"`
	Annotations map[string]string  `json:"annotations,omitempty"`
	// TrafficDistribution is spec.service.trafficDistribution, "" for
	// none.
	TrafficDistribution string `json:"trafficDistribution,omitempty"`
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
	MaxUnavailable intstr.IntOrString `json:"maxUnavailable"`
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
	Host string `json:"host"`
	// Path is the prefix routed to the REST port: RESTAPIPath.
	Path          string            `json:"path"`
	ClassName     string            `json:"className,omitempty"`
	TLSSecretName string            `json:"tlsSecretName,omitempty"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// Routes are Gateway API routes to the Service.
type Routes struct {
	ParentRefs []ParentRef `json:"parentRefs"`
	Hostnames  []string    `json:"hostnames,omitempty"`
	HTTP       bool        `json:"http"`
	// HTTPMatches are the paths the HTTPRoute routes: each model's REST
	// API (modelMatches).
	HTTPMatches []PathMatch `json:"httpMatches"`
	GRPC        bool        `json:"grpc"`
	// RequestTimeout is the HTTPRoute's timeouts.request, a Gateway API
	// duration (gatewayDuration); "" leaves it to the Gateway.
	RequestTimeout string `json:"requestTimeout,omitempty"`
}

// BackendTLS has the Gateways speak TLS to the gRPC port, which serves it
// (spec.tls), through a BackendTLSPolicy: they ask for the certificate by
// Hostname and check it against CA (PEM, in the ConfigMap CAConfigMap),
// or, where CA is "", against the CAs they know (wellKnownCACertificates).
type BackendTLS struct {
	Hostname    string `json:"hostname"`
	CA          string `json:"ca,omitempty"`
	CAConfigMap string `json:"caConfigMap,omitempty"`
}

// PathMatch is one path an HTTPRoute routes, of the Gateway API's match
// types PathPrefix and Exact.
type PathMatch struct {
	Type  string `json:"type"`
	Value string `json:"value"`
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

// Program is what a container of the operator's image in a ModelServer's
// pods runs: the image, and the command, nil for the image's entrypoint.
type Program struct {
	Image   string
	Command []string
}

// LiveJob is what a fetch generation's existing Job was made with, and so
// must be rendered with again.
type LiveJob struct {
	Program
	// NodeSelector is the node selector of the Job's pod.
	NodeSelector map[string]string
	// ReadsModelConfig says the Job's fetch reads the model config to
	// prune the volume: a Job made before it did is rendered without.
	ReadsModelConfig bool
	// Settings are the fetch settings the Job was made with.
	Settings FetchSettings
	// Finished says its fetch has ended: the Job keeps its deadline too.
	Finished bool
}

// Inputs are what the values depend on besides the ModelServer's spec.
type Inputs struct {
	// ChartVersion and AppVersion of the embedded chart, for labels.
	ChartVersion, AppVersion string
	// FetchImage is the operator's own image, whose fetcher
	// (fetchcontract.FetcherCommand) fetches the model in new fetch Jobs
	// and waits for it in new serving pods.
	FetchImage string
	// LiveJobs maps a fetch generation whose Job exists to what its pod
	// was made with: a Job's pod template cannot change, and after an
	// operator upgrade the release must still render the Jobs as they are.
	LiveJobs map[string]LiveJob
	// TLSCertDigest is a digest of the certificates of spec.tls's Secret
	// (tls.crt, and ca.crt where clients must present one), which the
	// controller has checked: a new certificate rolls the pods, since TF
	// Serving reads it only at start. "" without spec.tls.
	TLSCertDigest string
	// Served maps a model's name to the fetch generation it is served
	// from: the newest one that succeeded, unless that found the model
	// served unchanged (ModelStatus.ServedGeneration). A model of spec.models missing
	// from it has no data yet and is left out of the model config; the
	// serving pods stay at zero replicas until some model has data. The
	// model of spec.model missing from it is served from the generation
	// being fetched, its pods waiting for the data (ModelWait), unless
	// that fetch failed (FailedFetches).
	Served map[string]string
	// Pins maps a fetch generation whose Job succeeded to what it found,
	// which the serving pods' own copies must match in storage mode
	// PerPod (PinsFile).
	Pins map[string]Pin
	// LiveServingPod is the serving Deployment's pod template, nil if
	// there is none. Its init containers of the operator's image keep
	// their image and command while their arguments stay the same, so
	// that upgrading the operator restarts no serving pod (initContainer);
	// in storage mode PerPod, the fetch containers of the generations the
	// pods serve are kept as they are (podFetches).
	LiveServingPod *corev1.PodSpec
	// LiveRestartChecksum is the live pod template's RestartChecksum
	// (AnnotationRestartChecksum), "" without a Deployment.
	LiveRestartChecksum string
	// FailedFetches holds the models whose current fetch failed.
	FailedFetches map[string]bool
	// ProxyEnv is the operator's HTTP(S)_PROXY/NO_PROXY, passed on to the
	// serving and fetch containers.
	ProxyEnv []corev1.EnvVar
	// LiveReplicas is the serving Deployment's replica count, nil if it
	// does not exist.
	LiveReplicas *int32
	// GatewayTrust is how a Gateway can check the certificate of spec.tls's
	// Secret, where the spec routes gRPC through Gateways: nil where
	// unknown (the Secret cannot be read, and the pods serve what they
	// started with), which renders no BackendTLSPolicy.
	GatewayTrust *GatewayTrust
	// APIs says, by APIKey, whether the optional kinds the spec asks for
	// (Gateway API routes, ServiceMonitor) exist in the cluster. A kind
	// that does not is left out, with a warning.
	APIs map[string]bool
}

// GatewayTrust is what the controller found a Gateway needs to check the
// gRPC port's certificate (servingtls.TrustFor): the hostname and the
// issuer's CAs (PEM, "" for those Gateways know), or the Problem that
// keeps a Gateway from checking it.
type GatewayTrust struct {
	Hostname, CA, Problem string
}

// The optional kinds, rendered only where their API is installed.
var (
	HTTPRouteKind = schema.GroupVersionKind{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "HTTPRoute"}
	GRPCRouteKind = schema.GroupVersionKind{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "GRPCRoute"}
	// BackendTLSPolicyKind is in the Gateway API's standard channel since
	// v1.4; before, as v1alpha3, only in its experimental one.
	BackendTLSPolicyKind = schema.GroupVersionKind{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "BackendTLSPolicy"}
	ServiceMonitorKind   = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}
)

// APIKey is a kind's key in Inputs.APIs.
func APIKey(gvk schema.GroupVersionKind) string { return gvk.GroupVersion().String() + "/" + gvk.Kind }

func (in Inputs) has(gvk schema.GroupVersionKind) bool { return in.APIs[APIKey(gvk)] }

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

// RESTAPIPath is the prefix of TF Serving's REST API, the one part of the
// REST port an Ingress or an HTTPRoute lets in from outside the cluster:
// the metrics (MonitoringPath) stay inside.
const RESTAPIPath = "/v1"

// Files of the serving ConfigMap.
const (
	BatchingConfigFile   = "batching.config"
	MonitoringConfigFile = "monitoring.config"
)

// ConfigPollSeconds is --model_config_file_poll_wait_seconds: how often TF
// Serving re-reads the model config, and so how soon a new version policy
// or label takes effect.
const ConfigPollSeconds = 30
