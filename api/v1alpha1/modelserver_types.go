package v1alpha1

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// DefaultImage is the TensorFlow Serving image used when spec.image is empty.
// Keep it in step with the +kubebuilder:default marker on Spec.Image.
const DefaultImage = "tensorflow/serving:2.19.1"

// MaxNameLength bounds metadata.name: a Helm release name is at most 53
// characters, and the release is named after the ModelServer.
const MaxNameLength = 53

// ModelServer is a TensorFlow Serving deployment of one model (spec.model)
// or of several models in one server (spec.models), managed by the operator
// as a Helm release: a model-fetch Job per model, a ConfigMap with the model
// config, a Deployment, a Service and a volume for the models.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=ms,categories={all,ml}
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.ready`
// +kubebuilder:printcolumn:name="Model",type=string,JSONPath=`.status.modelNames`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.status.endpoints.rest`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.status.release.revision`,priority=1,description="Helm release revision"
// +kubebuilder:printcolumn:name="Storage",type=string,JSONPath=`.spec.model.storageUri`,priority=1,description="Where the model is fetched from"
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`,priority=1,description="Which step is pending or failed, and why"
// +kubebuilder:printcolumn:name="External",type=string,JSONPath=`.status.endpoints.external[0].rest`,priority=1,description="The REST API's URL from outside the cluster, the first way in that carries its traffic"
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 53",message="metadata.name must be at most 53 characters: it names the Helm release and prefixes every object the operator creates"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS-1035 label (lower-case letters, digits and '-', starting with a letter): it also names the Service"
type ModelServer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired serving stack.
	// +required
	Spec ModelServerSpec `json:"spec"`
	// status is what the operator last observed of the stack.
	// +optional
	Status ModelServerStatus `json:"status,omitempty"`
}

// ModelServerSpec is the desired state of a ModelServer.
// +kubebuilder:validation:XValidation:rule="self.ports.grpc != self.ports.rest",message="spec.ports.grpc and spec.ports.rest must differ"
// +kubebuilder:validation:XValidation:rule="has(self.model) != has(self.models)",message="set exactly one of spec.model (one model) and spec.models (several models in one server)"
// +kubebuilder:validation:XValidation:rule="!has(self.model) || !self.model.storageUri.startsWith('pvc://') || !has(self.storage.storageClassName)",message="spec.storage does not apply to a pvc:// model: the model is read from that claim"
// +kubebuilder:validation:XValidation:rule="!has(self.model) || !self.model.storageUri.startsWith('pvc://') || !has(self.storage.mode) || self.storage.mode != 'PerPod'",message="spec.storage.mode PerPod does not apply to a pvc:// model: every pod reads the model from that claim"
// +kubebuilder:validation:XValidation:rule="!has(self.replicas) || !has(self.autoscaling)",message="spec.replicas and spec.autoscaling are mutually exclusive: remove spec.replicas to let the autoscaler set the number of pods (kubectl scale does not apply while spec.autoscaling is set)"
type ModelServerSpec struct {
	// model names the model and where to fetch it from. Set either model
	// or models.
	// +optional
	Model *ModelSpec `json:"model,omitempty"`

	// models serves several models from one TensorFlow Serving Deployment:
	// each is fetched by a Job of its own and listed in one model config.
	// Every entry needs a unique name; pvc:// URIs are not supported here
	// (use spec.model for a model on a claim of yours).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(m, has(m.name))",message="spec.models: every model needs a name"
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, has(a.name) && has(b.name) && a.name == b.name))",message="spec.models: model names must be unique"
	// +kubebuilder:validation:XValidation:rule="self.all(m, !m.storageUri.startsWith('pvc://'))",message="spec.models: pvc:// models are supported in spec.model only"
	// +listType=atomic
	// +optional
	Models []ModelSpec `json:"models,omitempty"`

	// replicas is the number of TensorFlow Serving pods (default 1).
	// `kubectl scale` sets it through the scale subresource. Leave it unset
	// when spec.autoscaling is set.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// autoscaling lets a HorizontalPodAutoscaler (autoscaling/v2) set the
	// number of serving pods between minReplicas and maxReplicas.
	// +optional
	Autoscaling *Autoscaling `json:"autoscaling,omitempty"`

	// rollout sets how many serving pods a rollout (a new model, image or
	// setting) may add above the count, and take away below it, at a time.
	// The default, one more and none fewer, never serves with fewer pods
	// than asked, and needs room for one more pod; where there is none (a
	// GPU pool in full use), maxSurge 0 and maxUnavailable 1 replace the
	// pods in place. A roll onto a refreshed model keeps the ModelServer
	// Ready while no more pods than maxUnavailable are down.
	// +optional
	Rollout *Rollout `json:"rollout,omitempty"`

	// disruption sets how many serving pods voluntary disruptions (node
	// drains, the cluster autoscaler's scale-downs, node pool upgrades)
	// may evict at a time, through the PodDisruptionBudget made where more
	// than one pod may run. The default, one, keeps all pods but one
	// serving, and drains a node of many pods slowly: each eviction waits
	// for the pod before to be replaced and its model loaded.
	// +optional
	Disruption *Disruption `json:"disruption,omitempty"`

	// image is the TensorFlow Serving image. Default: tensorflow/serving
	// at the operator's pinned version, or its -gpu variant when
	// resources.limits asks for nvidia.com/gpu. Docker Hub's
	// tensorflow/serving images are built for linux/amd64 alone: with one
	// of them, the pods keep to nodes labelled kubernetes.io/arch=amd64,
	// unless podTemplate chooses an architecture itself.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[^\s]+$`
	// +optional
	Image string `json:"image,omitempty"`

	// imagePullPolicy of the serving container.
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +kubebuilder:default=IfNotPresent
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// resources of the serving container. TF Serving holds the models it
	// serves in memory: a memory limit below their fetched size is warned
	// of in status.warnings. TensorFlow's thread pools are sized to the
	// CPU limit, in whole cores rounded up (see extraArgs).
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// ports TensorFlow Serving listens on.
	// +kubebuilder:default={}
	// +optional
	Ports Ports `json:"ports,omitempty"`

	// tls serves the gRPC API over TLS, with the certificate and key of a
	// kubernetes.io/tls Secret (a cert-manager Certificate, or kubectl
	// create secret tls, makes one). TF Serving has no TLS on its REST API:
	// that stays plain HTTP inside the cluster (spec.ingress.tlsSecretName
	// covers it outside). TF Serving reads the certificate only at start:
	// when the Secret's certificate changes, the pods roll, one at a time.
	// +optional
	TLS *TLSSpec `json:"tls,omitempty"`

	// service exposes the serving pods.
	// +kubebuilder:default={}
	// +optional
	Service ServiceSpec `json:"service,omitempty"`

	// storage is the volume the model is fetched into (not used for pvc:// models).
	// +kubebuilder:default={}
	// +optional
	Storage StorageSpec `json:"storage,omitempty"`

	// podTemplate holds extras for the serving pods and the model-fetch pod.
	// +optional
	PodTemplate PodTemplate `json:"podTemplate,omitempty"`

	// fetch sets how long each model-fetch Job may run, and its container's
	// resources. A change fetches nothing again and replaces no pod: it
	// applies to the fetches to come, a new timeout to a fetch running too.
	// A fetch that failed (its time or memory spent, or for any other
	// reason) is tried again with the new settings.
	// +optional
	Fetch *FetchSpec `json:"fetch,omitempty"`

	// batching turns on TensorFlow Serving's server-side request batching
	// (--enable_batching with a batching parameters file). A change
	// restarts the pods, one at a time: TF Serving reads it at start.
	// +optional
	Batching *Batching `json:"batching,omitempty"`

	// extraArgs are more flags for tensorflow_model_server, after the
	// operator's own: each one flag written --name=value, or --name alone
	// for a boolean, such as --rest_api_num_threads=16,
	// --tensorflow_intra_op_parallelism=4 or --enable_model_warmup=false.
	// The flags the operator sets from the rest of the spec (ports, model
	// config, batching, monitoring, TLS) are refused, and so is a value the
	// server could not read as its flag's type. A flag TF Serving 2.19 does
	// not have is passed on with a warning in status.warnings: the server
	// ignores flags it does not know. A change restarts the pods, one at a
	// time: TF Serving reads its flags at start. The operator sizes
	// TensorFlow's thread pools to the CPU limit (resources) with
	// --tensorflow_intra_op_parallelism and
	// --tensorflow_inter_op_parallelism, unless these set them.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	// +kubebuilder:validation:items:XValidation:rule="self.matches('^--[a-z][a-z0-9_]*(=.*)?$')",message="spec.extraArgs: each item is one tensorflow_model_server flag, written --name=value (or --name alone for a boolean); the server does not read --name and its value as two items"
	// +kubebuilder:validation:items:XValidation:rule="!self.matches('^--(port|rest_api_port|model_config_file|model_config_file_poll_wait_seconds|model_name|model_base_path|allow_version_labels_for_unavailable_models|enable_batching|batching_parameters_file|monitoring_config_file|ssl_config_file)(=.*)?$')",message="spec.extraArgs: the operator sets this flag from the spec: --port and --rest_api_port from spec.ports, the model config from spec.model or spec.models, batching from spec.batching, monitoring from spec.monitoring, --ssl_config_file from spec.tls"
	// +kubebuilder:validation:items:XValidation:rule="!self.matches('^--(version|help)(=.*)?$')",message="spec.extraArgs: --version and --help make the server print and exit: it would never serve"
	// +listType=atomic
	// +optional
	ExtraArgs []string `json:"extraArgs,omitempty"`

	// monitoring exposes TensorFlow Serving's Prometheus metrics.
	// +kubebuilder:default={}
	// +optional
	Monitoring Monitoring `json:"monitoring,omitempty"`

	// ingress exposes the REST API through an Ingress.
	// +optional
	Ingress *IngressSpec `json:"ingress,omitempty"`

	// gateway exposes the REST and gRPC APIs through Gateway API routes
	// (an HTTPRoute and a GRPCRoute). The Gateway API must be installed in
	// the cluster; without it the rest is served and status.warnings says
	// the routes were left out, until the API is installed.
	// +optional
	Gateway *GatewaySpec `json:"gateway,omitempty"`

	// networkPolicy, when set, admits traffic to the serving pods only
	// from the ModelServer's own namespace and the namespaces listed.
	// +optional
	NetworkPolicy *NetworkPolicySpec `json:"networkPolicy,omitempty"`
}

// Autoscaling configures the HorizontalPodAutoscaler of the serving pods.
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",message="spec.autoscaling.minReplicas must not exceed maxReplicas"
// +kubebuilder:validation:XValidation:rule="has(self.targetCPUUtilizationPercentage) || has(self.targetMemoryUtilizationPercentage) || (has(self.metrics) && size(self.metrics) > 0)",message="spec.autoscaling needs targetCPUUtilizationPercentage, targetMemoryUtilizationPercentage or metrics"
type Autoscaling struct {
	// minReplicas is the fewest serving pods (default 1).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	MinReplicas *int32 `json:"minReplicas,omitempty"`
	// maxReplicas is the most serving pods.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +required
	MaxReplicas int32 `json:"maxReplicas"`
	// targetCPUUtilizationPercentage is the average CPU use, as a share of
	// the pods' CPU request, the autoscaler aims for. Needs
	// resources.requests.cpu.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	TargetCPUUtilizationPercentage *int32 `json:"targetCPUUtilizationPercentage,omitempty"`
	// targetMemoryUtilizationPercentage is the average memory use, as a
	// share of the pods' memory request, the autoscaler aims for. Needs
	// resources.requests.memory.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	TargetMemoryUtilizationPercentage *int32 `json:"targetMemoryUtilizationPercentage,omitempty"`
	// metrics are more metrics to scale on, as in autoscaling/v2, beside
	// (or in place of) the CPU and memory targets: a Pods metric such as
	// TF Serving's request rate, served by a metrics adapter
	// (prometheus-adapter, KEDA's), an Object or an External one. The
	// autoscaler scales to the most replicas any of them asks for. What
	// the apiserver would refuse in them makes the ModelServer
	// InvalidSpec, the field named; a metric no adapter serves is told in
	// status.warnings once the autoscaler says so.
	// +kubebuilder:validation:MaxItems=10
	// +listType=atomic
	// +optional
	Metrics []autoscalingv2.MetricSpec `json:"metrics,omitempty"`
	// behavior tunes how fast the autoscaler scales up and down, as in
	// autoscaling/v2. What the apiserver would refuse in it (a policy's
	// value of 0, a period over 1800 seconds, a window over 3600) makes the
	// ModelServer InvalidSpec, the field named, before anything is created.
	// +optional
	Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
}

// Batching is TensorFlow Serving's BatchingParameters.
type Batching struct {
	// maxBatchSize is the largest batch.
	// +kubebuilder:default=32
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	// +optional
	MaxBatchSize int32 `json:"maxBatchSize,omitempty"`
	// batchTimeoutMicros is how long a batch waits to fill up.
	// +kubebuilder:default=1000
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=60000000
	// +optional
	BatchTimeoutMicros *int64 `json:"batchTimeoutMicros,omitempty"`
	// maxEnqueuedBatches bounds the queue; requests beyond it are refused.
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	MaxEnqueuedBatches int32 `json:"maxEnqueuedBatches,omitempty"`
	// numBatchThreads is how many batches are processed in parallel;
	// default: the CPU limit of spec.resources in whole cores, rounded
	// up, else TF Serving's (the node's cores).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1024
	// +optional
	NumBatchThreads *int32 `json:"numBatchThreads,omitempty"`
	// allowedBatchSizes, when set, pads each batch to the next listed size;
	// the last must equal maxBatchSize.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:Minimum=1
	// +listType=atomic
	// +optional
	AllowedBatchSizes []int32 `json:"allowedBatchSizes,omitempty"`
}

// Monitoring configures TensorFlow Serving's Prometheus endpoint.
// +kubebuilder:validation:XValidation:rule="!has(self.p99Latency) || !has(self.enabled) || self.enabled",message="spec.monitoring.p99Latency needs spec.monitoring.enabled: it is measured by TF Serving's own metrics"
// +kubebuilder:validation:XValidation:rule="!has(self.availability) || !has(self.enabled) || self.enabled",message="spec.monitoring.availability needs spec.monitoring.enabled: it is measured by TF Serving's own metrics"
type Monitoring struct {
	// enabled serves Prometheus metrics at /monitoring/prometheus/metrics
	// on the REST port and annotates the pods for scraping.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// serviceMonitor, when set, renders a Prometheus Operator
	// ServiceMonitor (monitoring.coreos.com/v1); where that API is not
	// installed, status.warnings says it was left out.
	// +optional
	ServiceMonitor *ServiceMonitorSpec `json:"serviceMonitor,omitempty"`
	// p99Latency is the latency that 99 in 100 of the ModelServer's
	// requests (predict, classify, regress) should stay under, such as
	// 250ms. The operator exports it as modelserver_latency_objective_seconds,
	// and the alert ModelServerLatencyHigh (dist/monitoring.yaml) fires
	// when TF Serving's own p99 over 5 minutes has stood above it for 10
	// minutes, at 1 request per second or more. TF Serving's metrics must
	// be scraped (serviceMonitor) for the alert to see them.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1ms') && duration(self) <= duration('1h')",message="spec.monitoring.p99Latency must be from 1ms to 1h"
	// +optional
	P99Latency *metav1.Duration `json:"p99Latency,omitempty"`
	// availability is the percentage of the ModelServer's requests that
	// should not fail on the server's side, such as "99.9": its error
	// budget is the rest. The operator exports it as
	// modelserver_availability_objective_ratio, and the alerts
	// ModelServerErrorBudgetBurning (at 14.4 times the budget's rate, over
	// 1 hour and 5 minutes: 2% of a 30-day budget in an hour) and
	// ModelServerErrorBudgetBurningSlowly (6 times, over 6 hours and 30
	// minutes) fire on TF Serving's own request counts. From 90 to 99.999.
	// +kubebuilder:validation:Pattern=`^[0-9]{2}(\.[0-9]{1,3})?$`
	// +kubebuilder:validation:XValidation:rule="double(self) >= 90.0",message="spec.monitoring.availability must be from 90 to 99.999 (percent)"
	// +optional
	Availability string `json:"availability,omitempty"`
}

// ServiceMonitorSpec configures the ServiceMonitor.
type ServiceMonitorSpec struct {
	// interval between scrapes, such as 30s.
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:Pattern=`^[0-9]+(ms|s|m|h)$`
	// +optional
	Interval string `json:"interval,omitempty"`
	// labels added to the ServiceMonitor, for a Prometheus's
	// serviceMonitorSelector.
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// Rollout is the rolling update of the serving pods: each field a count
// of pods or a percentage of the count (maxSurge rounded up,
// maxUnavailable down), as a Deployment's.
// +kubebuilder:validation:XValidation:rule="!has(self.maxSurge) || !(type(self.maxSurge) == int ? self.maxSurge == 0 : self.maxSurge.matches('^0+%$')) || (has(self.maxUnavailable) && !(type(self.maxUnavailable) == int ? self.maxUnavailable == 0 : self.maxUnavailable.matches('^0+%$')))",message="spec.rollout: maxSurge 0 needs a maxUnavailable above 0 (its default is 0): a rollout could then neither add a pod nor take one away"
type Rollout struct {
	// maxSurge is how many pods a rollout may run above the count. Default 1.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=10
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]{1,9}%$')",message="spec.rollout.maxSurge is a count of pods (0 or more) or a percentage of them, such as 25%"
	// +optional
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`
	// maxUnavailable is how many pods a rollout may take below the count
	// before their replacements are ready. Default 0. Where it lets a
	// rollout stop every pod (one pod and a maxUnavailable of 1, or 100%),
	// the endpoint is down for the time a new pod takes to load the model,
	// which status.warnings says.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=4
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : (self.matches('^[0-9]{1,3}%$') && int(self.replace('%', '')) <= 100)",message="spec.rollout.maxUnavailable is a count of pods (0 or more) or a percentage of them, at most 100%"
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// Disruption is the serving pods' PodDisruptionBudget.
type Disruption struct {
	// maxUnavailable is how many serving pods may be unavailable while an
	// eviction is allowed: a count, or a percentage of the pods rounded up
	// (25% of 10 pods is 3), as a PodDisruptionBudget's. Default 1. 0 is
	// refused: it would block every node drain. Where it lets evictions
	// take every pod, the endpoint may go down while they are replaced,
	// which status.warnings says. Pods not ready may always be evicted.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=4
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : (self.matches('^[0-9]{1,3}%$') && int(self.replace('%', '')) >= 1 && int(self.replace('%', '')) <= 100)",message="spec.disruption.maxUnavailable is a count of pods (1 or more) or a percentage of them from 1% to 100%: 0 would block every node drain"
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// TLSSpec is the TLS of the gRPC API.
// +kubebuilder:validation:XValidation:rule="!has(self.clientCA) || self.clientAuth == 'Require'",message="spec.tls.clientCA is for clientAuth Require: it names the CAs that sign the clients' certificates, and only Require asks clients for one"
type TLSSpec struct {
	// secretName is a Secret of type kubernetes.io/tls in the ModelServer's
	// namespace: tls.crt, the server's certificate (its chain after it),
	// and tls.key, its private key, in PEM. The operator reads only its
	// certificates; the key goes from the Secret to the pods alone.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	SecretName string `json:"secretName"`
	// clientAuth: None (the default) serves any client; Require makes it
	// mutual TLS: a client must present a certificate signed by a CA in the
	// Secret's ca.crt (which must then be there), or in clientCA.
	// +kubebuilder:validation:Enum=None;Require
	// +kubebuilder:default=None
	// +optional
	ClientAuth TLSClientAuth `json:"clientAuth,omitempty"`
	// clientCA holds the CA certificates that sign the clients'
	// certificates, in place of the Secret's ca.crt, for clientAuth
	// Require: where the server's certificate comes from another CA than
	// the clients' (a public one, whose Secret has no ca.crt of theirs),
	// or the clients' CAs are a bundle of their own (trust-manager writes
	// one to a ConfigMap). A change of it rolls the pods, as a renewed
	// certificate does: at once for a kubernetes.io/tls Secret, which the
	// operator watches, within a minute for a ConfigMap or another Secret.
	// +optional
	ClientCA *TLSClientCA `json:"clientCA,omitempty"`
}

// TLSClientCA is a ConfigMap or a Secret of the ModelServer's namespace,
// and the key in it, that holds the CA certificates clients' certificates
// must be signed by.
// +kubebuilder:validation:XValidation:rule="has(self.configMapName) != has(self.secretName)",message="spec.tls.clientCA names one ConfigMap (configMapName) or one Secret (secretName)"
type TLSClientCA struct {
	// configMapName is a ConfigMap of the namespace, such as a
	// trust-manager Bundle's target.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	ConfigMapName string `json:"configMapName,omitempty"`
	// secretName is a Secret of the namespace, of any type, such as a
	// cert-manager CA Issuer's.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	SecretName string `json:"secretName,omitempty"`
	// key of the ConfigMap or Secret whose value is the CA certificates,
	// PEM. Default ca.crt.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +kubebuilder:default=ca.crt
	// +optional
	Key string `json:"key,omitempty"`
}

// TLSClientAuth says whether the gRPC API asks its clients for a
// certificate.
type TLSClientAuth string

// The TLS client authentication modes.
const (
	TLSClientAuthNone    TLSClientAuth = "None"
	TLSClientAuthRequire TLSClientAuth = "Require"
)

// IngressSpec configures the Ingress of the REST API.
type IngressSpec struct {
	// host the Ingress answers for.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	Host string `json:"host"`
	// className is the IngressClass; default: the cluster's default class.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +optional
	ClassName string `json:"className,omitempty"`
	// tlsSecretName names a TLS Secret for host; without it the Ingress
	// serves plain HTTP.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +optional
	TLSSecretName string `json:"tlsSecretName,omitempty"`
	// annotations of the Ingress, for the controller that serves it.
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// GatewaySpec configures Gateway API routes to the serving pods.
// +kubebuilder:validation:XValidation:rule="!has(self.requestTimeout) || !has(self.rest) || self.rest",message="spec.gateway.requestTimeout bounds the REST API's requests, which rest: false routes nowhere"
type GatewaySpec struct {
	// parentRefs are the Gateways (or their listeners) the routes attach to.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	// +required
	ParentRefs []GatewayParentRef `json:"parentRefs"`
	// hostnames the routes match; default: any.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +listType=atomic
	// +optional
	Hostnames []string `json:"hostnames,omitempty"`
	// rest renders an HTTPRoute to the REST API of the models (default
	// true): their paths alone, so several ModelServers may share a
	// hostname, each reached by its models' names.
	// +kubebuilder:default=true
	// +optional
	REST *bool `json:"rest,omitempty"`
	// grpc renders a GRPCRoute to the gRPC API (default true). gRPC calls
	// name the model in their message, not their path: a hostname routes
	// gRPC to one ModelServer only. Where spec.tls serves it over TLS, a
	// BackendTLSPolicy has the Gateways speak TLS to the pods.
	// +kubebuilder:default=true
	// +optional
	GRPC *bool `json:"grpc,omitempty"`
	// requestTimeout is the longest a Gateway may take to answer a REST
	// request, from its receipt to the response's end: the HTTPRoute's
	// timeouts.request (support Extended: a Gateway without it refuses the
	// route; a Gateway API before 1.2 drops it; status.warnings says
	// either).
	// Unset, the Gateway's own default holds, which for some is 15 s
	// (Envoy's route timeout): short for a large batch, or a model on
	// CPU. 0s: no limit. A Gateway API duration, such as 90s, 2m or
	// 1m30s. gRPC clients set their own deadline (grpc-timeout), which
	// Gateways follow.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=24
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(h|m|s|ms)){1,4}$`
	// +kubebuilder:validation:XValidation:rule="duration(self) < duration('100000h')",message="spec.gateway.requestTimeout must be under 100000h"
	// +optional
	RequestTimeout *metav1.Duration `json:"requestTimeout,omitempty"`
}

// GatewayParentRef names a Gateway.
type GatewayParentRef struct {
	// name of the Gateway.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +required
	Name string `json:"name"`
	// namespace of the Gateway; default: the ModelServer's.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// sectionName is the Gateway listener to attach to; default: all.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +optional
	SectionName string `json:"sectionName,omitempty"`
}

// NetworkPolicySpec limits who may reach the serving pods.
type NetworkPolicySpec struct {
	// allowedNamespaces may reach the serving ports, besides the
	// ModelServer's own namespace. Empty: the own namespace only.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +listType=set
	// +optional
	AllowedNamespaces []string `json:"allowedNamespaces,omitempty"`
}

// ModelSpec names a model and where it is stored.
// +kubebuilder:validation:XValidation:rule="!has(self.credentialsSecret) || !self.storageUri.startsWith('pvc://')",message="spec.model.credentialsSecret does not apply to a pvc:// model"
// +kubebuilder:validation:XValidation:rule="!has(self.refreshInterval) || !self.storageUri.startsWith('pvc://')",message="spec.model.refreshInterval does not apply to a pvc:// model: it is served from its claim in place, where TensorFlow Serving finds new versions itself"
// +kubebuilder:validation:XValidation:rule="!has(self.refreshInterval) || !(self.storageUri.contains('#sha256=') || (self.storageUri.startsWith('oci://') && self.storageUri.contains('@')))",message="spec.model.refreshInterval does not apply to a storageUri that pins the model's digest: every round would fetch the same model"
// +kubebuilder:validation:XValidation:rule="!has(self.signature) || self.storageUri.startsWith('oci://')",message="spec.model.signature applies to oci:// models only: their signatures are in their registry"
// +kubebuilder:validation:XValidation:rule="!has(self.webIdentity) || self.storageUri.startsWith('s3://') || self.storageUri.startsWith('gs://') || self.storageUri.matches('(?i)^(https://|(abfss|wasbs)://[^/?#@]+@)[a-z0-9]{3,24}(-secondary)?[.]((blob|dfs)[.]core[.](windows[.]net|chinacloudapi[.]cn|usgovcloudapi[.]net)|z[0-9]{2}[.](blob|dfs)[.]storage[.]azure[.]net)(/|$)') || (self.storageUri.startsWith('oci://') && has(self.webIdentity.gkeWorkloadIdentity) && self.webIdentity.gkeWorkloadIdentity)",message="spec.model.webIdentity applies to s3://, gs:// and Azure Blob Storage (https://<account>.blob.core.windows.net/..., abfss://, wasbs://) models, and with gkeWorkloadIdentity to oci:// models in Artifact Registry"
// +kubebuilder:validation:XValidation:rule="!has(self.webIdentity) || !self.storageUri.startsWith('s3://') || !(has(self.webIdentity.provider) || has(self.webIdentity.serviceAccount) || has(self.webIdentity.clientId) || has(self.webIdentity.tenantId))",message="spec.model.webIdentity of an s3:// model names an IAM role (roleArn), not a provider, a service account or an Entra application"
// +kubebuilder:validation:XValidation:rule="!has(self.webIdentity) || !self.storageUri.startsWith('gs://') || ((has(self.webIdentity.provider) || (has(self.webIdentity.gkeWorkloadIdentity) && self.webIdentity.gkeWorkloadIdentity)) && !has(self.webIdentity.roleArn) && !has(self.webIdentity.clientId) && !has(self.webIdentity.tenantId))",message="spec.model.webIdentity of a gs:// model names its Workload Identity Federation provider, or gkeWorkloadIdentity: true, not an IAM role or an Entra application"
// +kubebuilder:validation:XValidation:rule="!has(self.webIdentity) || !has(self.webIdentity.gkeWorkloadIdentity) || !self.webIdentity.gkeWorkloadIdentity || ((self.storageUri.startsWith('gs://') || self.storageUri.matches('^oci://([a-z0-9-]+-docker[.]pkg[.]dev|([a-z]+[.])?gcr[.]io)/')) && !has(self.webIdentity.provider) && !has(self.webIdentity.serviceAccount) && !has(self.webIdentity.audience))",message="spec.model.webIdentity.gkeWorkloadIdentity applies to gs:// models and oci:// models in Artifact Registry (oci://<location>-docker.pkg.dev/...) or Container Registry (gcr.io), and reads them as GKE's metadata server identifies the pods (their service account, or the Google service account it is annotated with): name no provider, service account or audience"
// +kubebuilder:validation:XValidation:rule="!has(self.webIdentity) || !self.storageUri.matches('(?i)^(https://|(abfss|wasbs)://[^/?#@]+@)[a-z0-9]{3,24}(-secondary)?[.]((blob|dfs)[.]core[.](windows[.]net|chinacloudapi[.]cn|usgovcloudapi[.]net)|z[0-9]{2}[.](blob|dfs)[.]storage[.]azure[.]net)(/|$)') || !(has(self.webIdentity.roleArn) || has(self.webIdentity.provider) || has(self.webIdentity.serviceAccount))",message="spec.model.webIdentity of an Azure Blob Storage model names a Microsoft Entra application (clientId, tenantId), not an IAM role, a provider or a service account"
// +kubebuilder:validation:XValidation:rule="!has(self.webIdentity) || !has(self.webIdentity.eksPodIdentity) || !self.webIdentity.eksPodIdentity || (self.storageUri.startsWith('s3://') && !has(self.webIdentity.roleArn) && !has(self.webIdentity.audience))",message="spec.model.webIdentity.eksPodIdentity applies to s3:// models, and takes the role and the audience of the service account's association: name neither"
type ModelSpec struct {
	// name is the TensorFlow Serving model name, the <name> in
	// /v1/models/<name>. Default: the ModelServer's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9_.-]*$`
	// +optional
	Name string `json:"name,omitempty"`

	// storageUri is where the model is: s3://bucket/prefix, gs://bucket/prefix,
	// https://<account>.blob.core.windows.net/<container>/prefix (Azure
	// Blob Storage, also in Azure's other clouds; a Data Lake Storage Gen2
	// path may be written abfss://<container>@<account>.dfs.core.windows.net/prefix,
	// or wasbs://, and is read at the account's blob endpoint),
	// https://host/path (a .tar, .tar.gz, .tgz or .zip archive; end it with
	// #sha256=<hex> to pin it), pvc://claim/path (a claim of yours in this
	// namespace, mounted read-only as it is, nothing copied),
	// oci://registry/repository[:tag][@sha256:digest] (an image whose
	// /models holds the model, as KServe's modelcars, or an oras artifact
	// of its files; a tag is pulled again when it moves),
	// hf://<owner>/<repo>[@<revision>][/path] (a model repository of the
	// Hugging Face Hub, at the commit its revision, main by default, names
	// when the fetch begins), or an absolute
	// path in the fetch pod's file system. It must hold TensorFlow Serving's
	// layout: a directory per version, named by its number (1/, 2/ or a
	// zero-padded 00000123/), each with saved_model.pb and variables/.
	// Credentials come from credentialsSecret. A new URI is
	// fetched beside the model being served, which keeps serving until the
	// new one is ready.
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^[^\s\x00-\x1f"'$;|&<>\x60\\{}]*$`
	// +kubebuilder:validation:XValidation:rule="self.startsWith('s3://') || self.startsWith('gs://') || self.startsWith('http://') || self.startsWith('https://') || self.startsWith('abfss://') || self.startsWith('wasbs://') || self.startsWith('pvc://') || self.startsWith('oci://') || self.startsWith('hf://') || self.startsWith('/')",message="spec.model.storageUri must start with s3://, gs://, http://, https://, abfss://, wasbs://, pvc://, oci://, hf:// or / (an absolute path)"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('pvc://') || self.matches('^pvc://[a-z0-9]([-a-z0-9.]*[a-z0-9])?(/.*)?$')",message="spec.model.storageUri: a pvc:// URI must name a claim: pvc://<claim>[/path]"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') || !self.contains('/../')",message="spec.model.storageUri: a path must not contain '..'"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('oci://') || self.matches('^oci://[^/?#@]+/[a-z0-9][^?#]*$')",message="spec.model.storageUri: an oci:// URI names an image, without user info, query or fragment: oci://<registry>/<repository>[:tag][@sha256:<digest>]"
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/') || self.startsWith('oci://') || !self.contains('#') || self.matches('^[^#]*#(sha256=[0-9a-fA-F]{64})?$')",message="spec.model.storageUri: the only fragment is #sha256=<64 hex digits>, a download's checksum"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('pvc://') || !self.contains('#')",message="spec.model.storageUri: a pvc:// URI takes no fragment: #sha256 pins a download, and a pvc:// model is not downloaded"
	// +kubebuilder:validation:XValidation:rule="!(self.startsWith('s3://') || self.startsWith('gs://')) || self.matches('^[a-z0-9]+://[^/?#]')",message="spec.model.storageUri: an s3:// or gs:// URI must name a bucket: s3://<bucket>[/prefix]"
	// +kubebuilder:validation:XValidation:rule="!(self.startsWith('s3://') || self.startsWith('gs://')) || self.matches('^[a-z0-9]+://[^/?#@]*(/[^?#]*)?(#.*)?$')",message="spec.model.storageUri: an s3:// or gs:// URI takes no user info or query parameters: put credentials in the credentialsSecret"
	// +kubebuilder:validation:XValidation:rule="!(self.startsWith('abfss://') || self.startsWith('wasbs://')) || self.matches('^[a-z]+://[a-z0-9$][-a-z0-9]*@[^/?#@:]+(/[^?#]*)?$')",message="spec.model.storageUri: an abfss:// or wasbs:// URI names a container at a storage account, without a password, query or fragment: abfss://<container>@<account>.dfs.core.windows.net[/path]"
	// +kubebuilder:validation:XValidation:rule="!(self.startsWith('http://') || self.startsWith('https://')) || self.matches('^https?://[^/?#@]+([/?#].*)?$')",message="spec.model.storageUri: an http(s):// URL must name a host and take no user info: put an Authorization header in the credentialsSecret's http-headers"
	// +kubebuilder:validation:XValidation:rule="!(self.startsWith('http://') || self.startsWith('https://')) || self.matches('(?i)^https://[a-z0-9]{3,24}(-secondary)?[.]((blob|dfs)[.]core[.](windows[.]net|chinacloudapi[.]cn|usgovcloudapi[.]net)|z[0-9]{2}[.](blob|dfs)[.]storage[.]azure[.]net)/') || self.matches('^https?://[^/?#]*/([^?#]*/)?([^/?#.][^/?#]*|[.][^/?#]+)([?#].*)?$')",message="spec.model.storageUri: an http(s):// URL must name a file or an archive (.tar, .tar.gz, .tgz, .zip), not a directory (an Azure Blob Storage URL, https://<account>.blob.core.windows.net/<container>/<prefix>, or its dfs endpoint's, may name one)"
	// +required
	StorageURI string `json:"storageUri"`

	// credentialsSecret names a Secret in the ModelServer's namespace whose
	// keys the model-fetch Job reads (per scheme: AWS_ACCESS_KEY_ID,
	// AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, AWS_REGION for s3://;
	// service-account.json for gs://; AZURE_STORAGE_ACCESS_KEY,
	// AZURE_STORAGE_SAS_TOKEN, or AZURE_TENANT_ID, AZURE_CLIENT_ID and
	// AZURE_CLIENT_SECRET for Azure Blob Storage; http-headers for https://;
	// .dockerconfigjson, ca.crt and plain-http for oci://, so that a
	// kubernetes.io/dockerconfigjson Secret serves; HF_TOKEN, and
	// HF_ENDPOINT for a mirror, for hf://).
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +optional
	CredentialsSecret string `json:"credentialsSecret,omitempty"`

	// webIdentity has the fetch read the model with a token of the pods'
	// service account (spec.podTemplate.serviceAccountName), projected
	// into the fetch pod alone, instead of a key in a Secret. For an s3://
	// model it assumes an IAM role through STS
	// AssumeRoleWithWebIdentity, as EKS's IAM roles for service accounts
	// do; the role's trust policy must accept the cluster's service
	// account issuer, the audience and the subject
	// system:serviceaccount:<namespace>:<serviceAccountName>, and
	// webIdentity: {} takes the role the service account is annotated
	// with, and webIdentity: {eksPodIdentity: true} the role of its EKS
	// Pod Identity association. For a gs:// model it is exchanged through
	// Google Cloud's Workload Identity Federation provider, which must
	// trust the cluster's issuer, or, on GKE, webIdentity:
	// {gkeWorkloadIdentity: true} reads it as the node's GKE metadata
	// server identifies the pod (Workload Identity Federation for GKE). For an Azure Blob Storage model it signs in to
	// Microsoft Entra ID as an application whose federated credential
	// trusts the issuer and the subject (Microsoft Entra Workload ID);
	// webIdentity: {} takes the application the service account is
	// annotated with. Credentials are renewed while the fetch runs.
	// credentialsSecret may still give endpoints (AWS_REGION,
	// AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_STS, AWS_CA_BUNDLE;
	// GCS_ENDPOINT_URL, GCP_STS_ENDPOINT_URL,
	// GCP_IAM_CREDENTIALS_ENDPOINT_URL; AZURE_STORAGE_BLOB_ENDPOINT,
	// AZURE_AUTHORITY_HOST, AZURE_CA_BUNDLE; AWS_CONTAINER_CREDENTIALS_FULL_URI
	// for another EKS Pod Identity Agent), but no keys.
	// +optional
	WebIdentity *WebIdentity `json:"webIdentity,omitempty"`

	// signature, for an oci:// model, requires a cosign signature of the
	// image, made with one of these keys, before anything of it is
	// written: an unsigned model, or one signed by another key, fails the
	// fetch with reason SignatureNotVerified, and the model served stays.
	// +optional
	Signature *ModelSignature `json:"signature,omitempty"`

	// refetch, any text, fetches the model again from the same storageUri
	// when it changes: for a store whose contents changed in place (a new
	// version directory, files overwritten), which the operator does not
	// watch. The new copy is fetched beside the model being served, then
	// the pods roll onto it, as for a new storageUri, unless it is the
	// model they serve (the same digest): then nothing rolls. A pipeline
	// sets it to its run's name or the time.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[^\x00-\x1f\x7f]*$`
	// +optional
	Refetch string `json:"refetch,omitempty"`

	// refreshInterval fetches the model again from the same storageUri
	// this often, in the background (rounds begin at the ModelServer's
	// creation time plus a whole number of intervals): for a store a
	// training pipeline writes new versions into. The ModelServer stays
	// Ready throughout: a round whose model is unchanged replaces no pod;
	// one that found a new model rolls the pods onto it, zero-downtime; one
	// that failed leaves the model served, with a warning, until the next
	// round. A round does not begin while the last one's fetch runs. At
	// least 1m; each round is a fetch Job, which downloads only what
	// changed: a file S3, GCS or Azure lists, or an archive the store names
	// (an http(s):// one by a strong ETag), as it was when the copy on the
	// volume was fetched is taken from that copy. Not for a pvc:// model,
	// nor a storageUri that pins the model's digest.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^([0-9]{1,6}(h|m|s|ms)){1,4}$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m')",message="spec.model.refreshInterval must be at least 1m"
	// +optional
	RefreshInterval *metav1.Duration `json:"refreshInterval,omitempty"`

	// maxSizeBytes caps the size of the fetched model; a larger one fails
	// the fetch with reason TooLarge. Default: 1 TiB.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxSizeBytes *int64 `json:"maxSizeBytes,omitempty"`

	// versionPolicy chooses which versions TensorFlow Serving loads, and
	// so which version directories the fetch downloads from a store (an
	// archive or an image is fetched whole). Default: the latest version.
	// +optional
	VersionPolicy *VersionPolicy `json:"versionPolicy,omitempty"`

	// versionLabels map a label (such as stable or canary) to a version, so
	// that clients can ask for /v1/models/<name>/labels/<label>.
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[A-Za-z][A-Za-z0-9_-]{0,62}$'))",message="spec.model.versionLabels keys must be letters, digits, '_' or '-', starting with a letter, at most 63 characters"
	// +kubebuilder:validation:XValidation:rule="self.all(k, self[k] >= 1)",message="spec.model.versionLabels values must be versions >= 1"
	// +optional
	VersionLabels map[string]int64 `json:"versionLabels,omitempty"`
}

// WebIdentity names what an s3://, gs:// or Azure Blob Storage model's
// fetch reads it as, with the pods' service account token: an IAM role, a
// Workload Identity Federation provider (and a Google service account),
// or a Microsoft Entra application.
type WebIdentity struct {
	// roleArn is the role: arn:aws:iam::<account>:role/<name>, or an
	// S3-compatible store's (MinIO's arn:minio:iam:::role/<id>). Default:
	// the one the service account is annotated with,
	// eks.amazonaws.com/role-arn, as eksctl and EKS's IAM roles for
	// service accounts annotate it.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^arn:[a-z0-9-]+:iam:[^:]*:[0-9]*:role/[\x21-\x7e]+$`
	// +optional
	RoleARN string `json:"roleArn,omitempty"`
	// audience of the token, which the role's trust policy (its
	// <issuer>:aud condition) or the provider's allowed audiences name.
	// Default, for s3://: sts.amazonaws.com, as EKS's, or for a role taken
	// from the service account, its eks.amazonaws.com/audience annotation
	// if it has one; for gs://: the provider's own,
	// https://iam.googleapis.com/<provider>; for Azure:
	// api://AzureADTokenExchange, as Entra's federated credentials expect.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[\x21-\x7e]+$`
	// +optional
	Audience string `json:"audience,omitempty"`
	// provider, for a gs:// model, is the Workload Identity Federation
	// provider that trusts the cluster's service account issuer:
	// projects/<number>/locations/global/workloadIdentityPools/<pool>/providers/<provider>.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^projects/[0-9]+/locations/global/workloadIdentityPools/[a-z0-9-]+/providers/[a-z0-9-]+$`
	// +optional
	Provider string `json:"provider,omitempty"`
	// serviceAccount, for a gs:// model, is the Google service account
	// the federated identity impersonates to read the bucket (it grants
	// roles/iam.workloadIdentityUser to the identity); without it, the
	// federated identity reads the bucket itself.
	// +kubebuilder:validation:MaxLength=254
	// +kubebuilder:validation:Pattern=`^[a-z0-9-]+@[a-z0-9.-]+\.iam\.gserviceaccount\.com$`
	// +optional
	ServiceAccount string `json:"serviceAccount,omitempty"`
	// eksPodIdentity, for an s3:// model on EKS, takes the role of the
	// service account's EKS Pod Identity association (eks
	// create-pod-identity-association) from the node's EKS Pod Identity
	// Agent, for a token of the account with the audience
	// pods.eks.amazonaws.com: no OIDC provider, annotation or trust policy
	// of the cluster's issuer is needed.
	// +optional
	EKSPodIdentity bool `json:"eksPodIdentity,omitempty"`
	// gkeWorkloadIdentity, for a gs:// model, or an oci:// one in
	// Artifact Registry (<location>-docker.pkg.dev) or Container Registry
	// (gcr.io), on GKE with Workload Identity Federation for GKE, reads it
	// with the access tokens the node's GKE metadata server gives the
	// fetch pod (to a registry, as user oauth2accesstoken, and to Google's
	// registries only; credentials of the Secret or the pull secrets for
	// the registry go first): as the principal of the service
	// account in the project's workload identity pool
	// (<project>.svc.id.goog), or as the Google service account it is
	// annotated with (iam.gke.io/gcp-service-account). No key, token
	// projection or provider is needed. A fetch answered as another Google
	// service account (a node pool without the GKE metadata server gives
	// the node's) fails with reason AccessDenied rather than read the model
	// as the node.
	// +optional
	GKEWorkloadIdentity bool `json:"gkeWorkloadIdentity,omitempty"`
	// clientId, for an Azure Blob Storage model, is the application (or
	// user-assigned managed identity) signed in as: its client ID, which
	// holds a federated credential for the service account. Default: the
	// service account's azure.workload.identity/client-id annotation, as
	// Microsoft Entra Workload ID annotates it.
	// +kubebuilder:validation:Pattern=`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`
	// +kubebuilder:validation:MaxLength=36
	// +optional
	ClientID string `json:"clientId,omitempty"`
	// tenantId, for an Azure Blob Storage model, is the application's
	// Microsoft Entra tenant: its ID or a domain of it. Default: the
	// service account's azure.workload.identity/tenant-id annotation.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[0-9A-Za-z]([0-9A-Za-z.-]*[0-9A-Za-z])?$`
	// +optional
	TenantID string `json:"tenantId,omitempty"`
}

// ModelSignature names the keys whose cosign signature an oci:// model's
// image must carry.
type ModelSignature struct {
	// publicKeys are PEM public keys (-----BEGIN PUBLIC KEY-----, as
	// cosign generate-key-pair writes cosign.pub): ECDSA, RSA or Ed25519.
	// A signature by any of them verifies the image: list the next key
	// beside the current one to rotate.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=8192
	// +kubebuilder:validation:items:XValidation:rule="self.contains('-----BEGIN PUBLIC KEY-----')",message="spec.model.signature.publicKeys: each key is a PEM public key (-----BEGIN PUBLIC KEY-----), as cosign.pub is"
	// +listType=atomic
	// +required
	PublicKeys []string `json:"publicKeys"`
	// repository, registry/repository, is where the signatures are when
	// they were stored elsewhere than beside the image (cosign's
	// COSIGN_REPOSITORY), under the image's digest. The model's
	// credentials are used there too.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Repository string `json:"repository,omitempty"`
}

// VersionPolicy is TensorFlow Serving's model_version_policy: exactly one
// of latest, specific or all.
// +kubebuilder:validation:XValidation:rule="(has(self.latest) ? 1 : 0) + (has(self.specific) ? 1 : 0) + (has(self.all) ? 1 : 0) == 1",message="spec.model.versionPolicy must set exactly one of latest, specific or all"
type VersionPolicy struct {
	// latest serves the newest N versions.
	// +optional
	Latest *LatestVersions `json:"latest,omitempty"`
	// specific serves exactly these versions.
	// +optional
	Specific *SpecificVersions `json:"specific,omitempty"`
	// all serves every version found.
	// +optional
	All *AllVersions `json:"all,omitempty"`
}

// LatestVersions serves the newest NumVersions versions.
type LatestVersions struct {
	// numVersions is how many of the newest versions to serve.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	NumVersions int32 `json:"numVersions,omitempty"`
}

// SpecificVersions serves the listed versions.
type SpecificVersions struct {
	// versions to serve.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:Minimum=1
	// +listType=set
	Versions []int64 `json:"versions"`
}

// AllVersions serves every version in the model's base path.
type AllVersions struct{}

// Ports are the ports TensorFlow Serving listens on, in the pod and on the
// Service.
type Ports struct {
	// grpc is the gRPC port (--port).
	// +kubebuilder:default=8500
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=65535
	// +optional
	GRPC int32 `json:"grpc,omitempty"`
	// rest is the REST API port (--rest_api_port).
	// +kubebuilder:default=8501
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=65535
	// +optional
	REST int32 `json:"rest,omitempty"`
}

// ServiceSpec configures the Service in front of the serving pods.
type ServiceSpec struct {
	// type of the Service.
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	// +kubebuilder:default=ClusterIP
	// +optional
	Type corev1.ServiceType `json:"type,omitempty"`
	// annotations of the Service, e.g. for a cloud load balancer.
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// trafficDistribution sends each client's requests to serving pods
	// near it where one is ready: PreferSameZone (PreferClose is its
	// earlier name) to pods of the client's zone, which saves the
	// cross-zone transfer of every request and response and its latency;
	// PreferSameNode to pods of its node. With none near, requests go to
	// any pod. Clusters of Kubernetes 1.31 and later honor PreferClose,
	// of 1.34 and later the other two. Unset, requests go to any pod.
	// +kubebuilder:validation:Enum=PreferSameZone;PreferSameNode;PreferClose
	// +optional
	TrafficDistribution string `json:"trafficDistribution,omitempty"`
}

// FetchSpec tunes the model-fetch Jobs.
type FetchSpec struct {
	// timeout is the longest one model's fetch may take, its retries
	// included: the Job's activeDeadlineSeconds. A fetch still running then
	// is stopped and fails with reason Timeout. In storage mode PerPod it
	// bounds each attempt of a serving pod's fetch of its own copy too,
	// which the kubelet then runs again; the pods read it at each attempt,
	// so a new timeout replaces no pod. Default 1h; from 1m to 168h.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^([0-9]{1,6}(h|m|s|ms)){1,4}$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m') && duration(self) <= duration('168h')",message="spec.fetch.timeout must be from 1m to 168h"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// resources of the fetch container, in place of the default: requests
	// of 100m CPU and 128Mi memory, a 512Mi memory limit. The fetch holds
	// one 1 MiB buffer per request in flight; the page cache of what it
	// writes is charged to it too, and reclaimed as it goes. A fetch
	// killed for its memory limit fails with reason OutOfMemory.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
}

// StorageMode says where the serving pods read the model from.
type StorageMode string

// The storage modes.
const (
	StorageShared StorageMode = "Shared"
	StoragePerPod StorageMode = "PerPod"
)

// StorageSpec is the volume the operator creates for the model.
// +kubebuilder:validation:XValidation:rule="has(self.storageClassName) == has(oldSelf.storageClassName) && (!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)",message="spec.storage.storageClassName is immutable: the model volume's class cannot change"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.accessMode) || (has(self.accessMode) && self.accessMode == oldSelf.accessMode)",message="spec.storage.accessMode is immutable: the model volume's access mode cannot change"
// +kubebuilder:validation:XValidation:rule="(has(self.mode) ? self.mode : 'Shared') == (has(oldSelf.mode) ? oldSelf.mode : 'Shared')",message="spec.storage.mode is immutable: the pods cannot move between a shared model volume and copies of their own"
// +kubebuilder:validation:XValidation:rule="!has(self.mode) || self.mode != 'PerPod' || !has(self.accessMode) || self.accessMode == 'ReadWriteOnce'",message="spec.storage.accessMode does not apply to mode PerPod: each pod's copy is its own volume, ReadWriteOnce"
type StorageSpec struct {
	// mode says where the serving pods read the model from. Shared (the
	// default): each model is fetched once, by the model-fetch Job, into
	// one claim that every serving pod mounts read-only; a ReadWriteOnce
	// claim keeps them all on its node. PerPod: each serving pod fetches
	// its own copy, in an init container, into a volume of its own (an
	// emptyDir of size, or, with storageClassName, an ephemeral claim of
	// that class), so that the pods spread over nodes without a
	// ReadWriteMany class. The fetch Job still fetches and verifies each
	// model first, and a pod's copy must have the digest it found (an
	// oci:// model is pulled by the image digest it resolved): a store
	// changed in place since fails that pod's fetch with ModelChanged
	// rather than serve another model. Every pod start downloads the
	// model.
	// +kubebuilder:validation:Enum=Shared;PerPod
	// +optional
	Mode StorageMode `json:"mode,omitempty"`

	// size of the model volume.
	// +kubebuilder:default="10Gi"
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`
	// storageClassName of the claim; default: the cluster's default class.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
	// accessMode of the claim. ReadWriteOnce keeps every serving pod on the
	// node the claim is attached to; ReadWriteMany lets them spread.
	// +kubebuilder:validation:Enum=ReadWriteOnce;ReadWriteMany;ReadWriteOncePod
	// +kubebuilder:default=ReadWriteOnce
	// +optional
	AccessMode corev1.PersistentVolumeAccessMode `json:"accessMode,omitempty"`
}

// PodTemplate holds the pod settings users most often need. They apply to
// the serving pods and, where it makes sense (scheduling, pull secrets,
// annotations), to the model-fetch pod.
// +kubebuilder:validation:XValidation:rule="!has(self.drainSeconds) || !has(self.terminationGracePeriodSeconds) || self.drainSeconds < self.terminationGracePeriodSeconds",message="spec.podTemplate.drainSeconds must be less than terminationGracePeriodSeconds, or the pod is killed while still draining"
type PodTemplate struct {
	// labels added to the pods.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// annotations added to the pods.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// nodeSelector of the pods. With one of Docker Hub's tensorflow/serving
	// images (see image), kubernetes.io/arch=amd64 is added unless this or
	// a required node affinity names kubernetes.io/arch.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// tolerations of the pods.
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// affinity of the pods.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// serviceAccountName the pods run as; default: the namespace's default.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// imagePullSecrets for the serving and fetch images. An oci:// model's
	// fetch reads its registry's credentials from them too, after the
	// model's credentialsSecret.
	// +optional
	// +listType=atomic
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	// env added to the serving container.
	// +optional
	// +listType=atomic
	Env []corev1.EnvVar `json:"env,omitempty"`
	// priorityClassName of the serving pods.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// runtimeClassName of the serving pods: the container runtime handler
	// they run with, such as nvidia on GPU nodes whose default runtime does
	// not reach the GPUs. The fetch pod keeps the cluster's default.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +optional
	RuntimeClassName string `json:"runtimeClassName,omitempty"`
	// topologySpreadConstraints of the serving pods. Default: spread over
	// zones, and over nodes when the model volume can be mounted on
	// several nodes (ReadWriteMany), both as a preference.
	// +optional
	// +listType=atomic
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
	// terminationGracePeriodSeconds a serving pod has to finish in-flight
	// requests after it is told to stop.
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	// +optional
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`
	// drainSeconds a stopping serving pod keeps serving (a preStop sleep)
	// while Services and load balancers stop sending it requests. It must
	// be shorter than terminationGracePeriodSeconds.
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=600
	// +optional
	DrainSeconds *int64 `json:"drainSeconds,omitempty"`
	// loadTimeoutSeconds a serving pod's TensorFlow Serving has to load its
	// models, from the container's start: TF Serving opens its ports only
	// when they are loaded, and a container whose REST port is still closed
	// after this long is restarted by the kubelet (the startup probe). Raise
	// it for a model that takes longer to load. A change rolls the pods.
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=86400
	// +optional
	LoadTimeoutSeconds *int64 `json:"loadTimeoutSeconds,omitempty"`
}

// Phase summarises where a ModelServer is.
// +kubebuilder:validation:Enum=Pending;Fetching;Deploying;Ready;Degraded;Failed;Deleting;Paused
type Phase string

// The phases, in the order a healthy ModelServer goes through them.
const (
	PhasePending   Phase = "Pending"
	PhaseFetching  Phase = "Fetching"
	PhaseDeploying Phase = "Deploying"
	PhaseReady     Phase = "Ready"
	PhaseDegraded  Phase = "Degraded"
	PhaseFailed    Phase = "Failed"
	PhaseDeleting  Phase = "Deleting"
	// PhasePaused: reconciliation is paused (AnnotationPaused), and the
	// spec, or the release's objects, differ from what is deployed; the
	// difference waits for it to resume. Paused with nothing waiting, a
	// ModelServer has its usual phase.
	PhasePaused Phase = "Paused"
)

// ModelServerStatus is what the operator last observed.
type ModelServerStatus struct {
	// phase summarises the conditions.
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// conditions: ModelFetched, Deployed, Available and Ready; and
	// Paused while reconciliation is paused.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// replicas is the number of serving pods wanted (the scale subresource's status).
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// readyReplicas is the number of serving pods ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// ready is readyReplicas/replicas, for kubectl get.
	// +optional
	Ready string `json:"ready,omitempty"`
	// selector selects the serving pods (the scale subresource's selector).
	// +optional
	Selector string `json:"selector,omitempty"`
	// release is the Helm release that holds the stack.
	// +optional
	Release *ReleaseStatus `json:"release,omitempty"`
	// model is what was fetched, for a ModelServer of one model
	// (spec.model).
	// +optional
	Model *ModelStatus `json:"model,omitempty"`
	// modelNames lists the models served, comma-separated, for kubectl
	// get.
	// +optional
	ModelNames string `json:"modelNames,omitempty"`
	// models is what was fetched for each model, for a ModelServer of
	// several (spec.models), in spec order.
	// +optional
	// +listType=atomic
	Models []ModelStatus `json:"models,omitempty"`
	// endpoints clients connect to.
	// +optional
	Endpoints *Endpoints `json:"endpoints,omitempty"`
	// message says, when the ModelServer is not Ready, which step is
	// pending or failed and why.
	// +optional
	Message string `json:"message,omitempty"`
	// warnings name parts of the spec the operator could not honour while
	// serving the rest, such as routes of an API the cluster lacks.
	// +optional
	// +listType=atomic
	Warnings []string `json:"warnings,omitempty"`
}

// ReleaseStatus describes the Helm release.
type ReleaseStatus struct {
	// name of the release.
	Name string `json:"name"`
	// revision of the release last deployed.
	Revision int `json:"revision"`
	// chartVersion of the embedded chart deployed.
	ChartVersion string `json:"chartVersion"`
	// valuesDigest is a digest of the chart (its version and its files) and
	// the values deployed; an unchanged digest means there is nothing to
	// upgrade.
	ValuesDigest string `json:"valuesDigest"`
}

// ModelStatus describes the model being served.
type ModelStatus struct {
	// name is the TensorFlow Serving model name.
	Name string `json:"name"`
	// generation identifies the fetch inputs (URI, credentials, fetch pod
	// settings) the data was fetched with.
	// +optional
	FetchedGeneration string `json:"fetchedGeneration,omitempty"`
	// servedGeneration is the generation whose copy the pods serve, when
	// it is not fetchedGeneration: a fetch that found the model served
	// unchanged (the same digest; a refetch of a store nothing was added
	// to) leaves the pods on it, without a roll.
	// +optional
	ServedGeneration string `json:"servedGeneration,omitempty"`
	// digest of the fetched model, as the fetch Job reported it.
	// +optional
	Digest string `json:"digest,omitempty"`
	// sizeBytes of the fetched model.
	// +optional
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// resolvedImage is, for an oci:// model, the image it was pulled
	// from, by digest (registry/repository@sha256:...): what its tag named
	// when the fetch ran.
	// +optional
	ResolvedImage string `json:"resolvedImage,omitempty"`
	// signedBy is, for a model whose spec asks for a signature, the key
	// whose cosign signature of the image verified it: "sha256:" and the
	// hex of the sha256 of the key's DER form (openssl pkey -pubin -in
	// cosign.pub -outform DER | sha256sum).
	// +optional
	SignedBy string `json:"signedBy,omitempty"`
	// versions in the fetched model: those of the store the version
	// policy serves (every version of an archive or an image).
	// +optional
	// +listType=atomic
	Versions []int64 `json:"versions,omitempty"`
	// servedVersions are the versions the version policy selects among
	// those found: what TensorFlow Serving is configured to load.
	// +optional
	// +listType=atomic
	ServedVersions []int64 `json:"servedVersions,omitempty"`
	// versionLabels map each label to its version, as configured.
	// +optional
	VersionLabels map[string]int64 `json:"versionLabels,omitempty"`
	// endpoint is the in-cluster URL of this model's REST API.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// fetch is the state of this model's fetch (Missing, Running,
	// Succeeded or Failed) and message why it failed. A refresh round's
	// fetch is told in refresh instead.
	// +optional
	Fetch string `json:"fetch,omitempty"`
	// message says why the fetch failed.
	// +optional
	Message string `json:"message,omitempty"`
	// progress is how far the model's running fetch has come, as its
	// fetch pod last logged it: read from the pod's log once the fetch
	// has run for 15 seconds, then every 30 (less often with over 60
	// fetches running at once). Absent while no fetch of the model runs,
	// and where the pod's log cannot be read.
	// +optional
	Progress *FetchProgress `json:"progress,omitempty"`
	// refresh is the state of the model's periodic refresh
	// (refreshInterval), once it has one.
	// +optional
	Refresh *ModelRefresh `json:"refresh,omitempty"`
	// retry is where the retries of a fetch that failed for a reason a
	// retry may fix (the store unreachable, answering errors) stand: the
	// operator makes its Job again after 1, 2, 4, ... minutes, at most 30,
	// resuming from what the failed one completed. A failure no retry
	// fixes (NotFound, AccessDenied, ...), or one of time or memory, waits
	// for a change of the spec instead.
	// +optional
	Retry *FetchRetry `json:"retry,omitempty"`
}

// FetchProgress is how far a running fetch has come. Its counts are of
// what this fetch pod fetches: files that an earlier, stopped attempt
// completed, or that a copy already on the volume gave, are not in them.
type FetchProgress struct {
	// pod names the fetch pod whose log says it.
	Pod string `json:"pod"`
	// time is when the pod logged it.
	Time metav1.Time `json:"time"`
	// bytes is how much has been fetched.
	Bytes int64 `json:"bytes"`
	// totalBytes is how much is to be fetched, where known before the
	// fetch ends (not for an archive, which is extracted as it comes).
	// +optional
	TotalBytes *int64 `json:"totalBytes,omitempty"`
	// files is how many files have been fetched.
	Files int64 `json:"files"`
	// totalFiles is how many are to be, where known before the fetch ends.
	// +optional
	TotalFiles *int64 `json:"totalFiles,omitempty"`
	// bytesPerSecond is the rate over the 30 seconds before time (since
	// the fetch began, before that).
	// +optional
	BytesPerSecond int64 `json:"bytesPerSecond,omitempty"`
	// idleSeconds is how long, as of time, no byte had come in: a store
	// that holds a request back, or answers none.
	// +optional
	IdleSeconds int64 `json:"idleSeconds,omitempty"`
}

// FetchRetry is where the retries of a model's failed fetch stand.
type FetchRetry struct {
	// job names the fetch Job retried.
	Job string `json:"job"`
	// attempts is how many times it has been made again.
	Attempts int32 `json:"attempts"`
	// nextAttempt is when it is made again, if it has failed.
	// +optional
	NextAttempt *metav1.Time `json:"nextAttempt,omitempty"`
}

// ModelRefresh is where a model's periodic refresh stands.
type ModelRefresh struct {
	// round is when the newest refresh round began. The model's fetch
	// generation includes it, so each round is a fetch of its own.
	Round metav1.Time `json:"round"`
	// baseGeneration identifies the fetch inputs, all but the round, that
	// the model was last fetched with: a fetch of the same inputs in a
	// later round is a refresh, in the background; one of other inputs
	// (a new storageUri) is not.
	// +optional
	BaseGeneration string `json:"baseGeneration,omitempty"`
	// state of the round: Running; Unchanged (the model fetched is the
	// one served: no pod was replaced); Updated (a new model, which the
	// pods are rolled onto); or Failed (the model served stays).
	// +optional
	State string `json:"state,omitempty"`
	// message says why the round failed.
	// +optional
	Message string `json:"message,omitempty"`
	// nextRound is when the next round is due. It begins then, or once
	// this round's fetch has ended, if later.
	// +optional
	NextRound *metav1.Time `json:"nextRound,omitempty"`
}

// The states of a refresh round.
const (
	RefreshRunning   = "Running"
	RefreshUnchanged = "Unchanged"
	RefreshUpdated   = "Updated"
	RefreshFailed    = "Failed"
)

// Endpoints are the addresses of the model: in the cluster, and from
// outside it where the spec exposes it.
type Endpoints struct {
	// grpc is host:port of the gRPC API.
	GRPC string `json:"grpc"`
	// rest is the URL of the model's REST API.
	REST string `json:"rest"`
	// external are the model's addresses from outside the cluster, one
	// for each way in that carries its traffic: the Ingress once its
	// controller gives it an address, each Gateway that accepted the
	// routes, the LoadBalancer Service once it has an address. A way in
	// that does not carry the traffic yet is not listed; one that cannot
	// (no such IngressClass, a route a Gateway refused) is named in
	// status.warnings.
	// +optional
	// +listType=atomic
	External []ExternalEndpoint `json:"external,omitempty"`
}

// ExternalEndpoint is one way into the cluster to the model.
type ExternalEndpoint struct {
	// via is what carries the traffic in: Ingress, LoadBalancer, or
	// Gateway <namespace>/<name>.
	Via string `json:"via"`
	// rest is the URL of the model's REST API through it.
	// +optional
	REST string `json:"rest,omitempty"`
	// grpc is host:port of the gRPC API through it.
	// +optional
	GRPC string `json:"grpc,omitempty"`
}

// ModelServerList is a list of ModelServers.
// +kubebuilder:object:root=true
type ModelServerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ModelServer `json:"items"`
}
