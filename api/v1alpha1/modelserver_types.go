package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultImage is the TensorFlow Serving image used when spec.image is empty.
// Keep it in step with the +kubebuilder:default marker on Spec.Image.
const DefaultImage = "tensorflow/serving:2.19.1"

// MaxNameLength bounds metadata.name: a Helm release name is at most 53
// characters, and the release is named after the ModelServer.
const MaxNameLength = 53

// ModelServer is a TensorFlow Serving deployment of one model, managed by the
// operator as a Helm release: a model-fetch Job, a ConfigMap with the model
// config, a Deployment, a Service and a volume for the model.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=ms,categories={all,ml}
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.ready`
// +kubebuilder:printcolumn:name="Model",type=string,JSONPath=`.status.model.name`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.status.endpoints.rest`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
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
// +kubebuilder:validation:XValidation:rule="!self.model.storageUri.startsWith('pvc://') || !has(self.storage.storageClassName)",message="spec.storage does not apply to a pvc:// model: the model is read from that claim"
type ModelServerSpec struct {
	// model names the model and where to fetch it from.
	// +required
	Model ModelSpec `json:"model"`

	// replicas is the number of TensorFlow Serving pods. `kubectl scale`
	// sets it through the scale subresource.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// image is the TensorFlow Serving image.
	// +kubebuilder:default="tensorflow/serving:2.19.1"
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

	// resources of the serving container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// ports TensorFlow Serving listens on.
	// +kubebuilder:default={}
	// +optional
	Ports Ports `json:"ports,omitempty"`

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
}

// ModelSpec names a model and where it is stored.
// +kubebuilder:validation:XValidation:rule="!has(self.credentialsSecret) || !self.storageUri.startsWith('pvc://')",message="spec.model.credentialsSecret does not apply to a pvc:// model"
type ModelSpec struct {
	// name is the TensorFlow Serving model name, the <name> in
	// /v1/models/<name>. Default: the ModelServer's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9_.-]*$`
	// +optional
	Name string `json:"name,omitempty"`

	// storageUri is where the model is: s3://bucket/prefix, gs://bucket/prefix,
	// https://host/path (a directory or a .tar, .tar.gz, .tgz or .zip archive),
	// pvc://claim/path (a claim of yours, mounted as it is), or an absolute
	// directory path on the node.
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^[^\s\x00-\x1f"'$;|&<>\x60\\{}]*$`
	// +kubebuilder:validation:XValidation:rule="self.startsWith('s3://') || self.startsWith('gs://') || self.startsWith('http://') || self.startsWith('https://') || self.startsWith('pvc://') || self.startsWith('/')",message="spec.model.storageUri must start with s3://, gs://, http://, https://, pvc:// or / (an absolute path)"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('pvc://') || self.matches('^pvc://[a-z0-9]([-a-z0-9.]*[a-z0-9])?(/.*)?$')",message="spec.model.storageUri: a pvc:// URI must name a claim: pvc://<claim>[/path]"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') || !self.contains('/../')",message="spec.model.storageUri: a path must not contain '..'"
	// +required
	StorageURI string `json:"storageUri"`

	// credentialsSecret names a Secret in the ModelServer's namespace whose
	// keys the model-fetch Job reads (per scheme: AWS_ACCESS_KEY_ID,
	// AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, AWS_REGION for s3://;
	// service-account.json for gs://; headers for https://).
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +optional
	CredentialsSecret string `json:"credentialsSecret,omitempty"`

	// maxSizeBytes caps the size of the fetched model; a larger one fails
	// the fetch with reason TooLarge. Default: 1 TiB.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxSizeBytes *int64 `json:"maxSizeBytes,omitempty"`

	// versionPolicy chooses which versions TensorFlow Serving loads.
	// Default: the latest version.
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
}

// StorageSpec is the volume the operator creates for the model.
// +kubebuilder:validation:XValidation:rule="has(self.storageClassName) == has(oldSelf.storageClassName) && (!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)",message="spec.storage.storageClassName is immutable: the model volume's class cannot change"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.accessMode) || (has(self.accessMode) && self.accessMode == oldSelf.accessMode)",message="spec.storage.accessMode is immutable: the model volume's access mode cannot change"
type StorageSpec struct {
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
type PodTemplate struct {
	// labels added to the pods.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// annotations added to the pods.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// nodeSelector of the pods.
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
	// imagePullSecrets for the serving and fetch images.
	// +optional
	// +listType=atomic
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	// env added to the serving container.
	// +optional
	// +listType=atomic
	Env []corev1.EnvVar `json:"env,omitempty"`
}

// Phase summarises where a ModelServer is.
// +kubebuilder:validation:Enum=Pending;Fetching;Deploying;Ready;Degraded;Failed;Deleting
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
)

// Condition types.
const (
	// ConditionModelFetched is True once the model-fetch Job of the current
	// model generation has succeeded.
	ConditionModelFetched = "ModelFetched"
	// ConditionDeployed is True once the Helm release is deployed with the
	// current spec.
	ConditionDeployed = "Deployed"
	// ConditionAvailable is True while at least the desired number of
	// serving pods are ready.
	ConditionAvailable = "Available"
	// ConditionReady is True when all of the above hold for the current
	// generation.
	ConditionReady = "Ready"
)

// ModelServerStatus is what the operator last observed.
type ModelServerStatus struct {
	// phase summarises the conditions.
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// conditions: ModelFetched, Deployed, Available and Ready.
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
	// model is what was fetched.
	// +optional
	Model *ModelStatus `json:"model,omitempty"`
	// endpoints clients connect to.
	// +optional
	Endpoints *Endpoints `json:"endpoints,omitempty"`
	// message says, when the ModelServer is not Ready, which step is
	// pending or failed and why.
	// +optional
	Message string `json:"message,omitempty"`
}

// ReleaseStatus describes the Helm release.
type ReleaseStatus struct {
	// name of the release.
	Name string `json:"name"`
	// revision of the release last deployed.
	Revision int `json:"revision"`
	// chartVersion of the embedded chart deployed.
	ChartVersion string `json:"chartVersion"`
	// valuesDigest is a digest of the chart version and values deployed; an
	// unchanged digest means there is nothing to upgrade.
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
	// digest of the fetched model, as the fetch Job reported it.
	// +optional
	Digest string `json:"digest,omitempty"`
	// sizeBytes of the fetched model.
	// +optional
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// versions found in the fetched model.
	// +optional
	// +listType=atomic
	Versions []int64 `json:"versions,omitempty"`
}

// Endpoints are the in-cluster addresses of the model.
type Endpoints struct {
	// grpc is host:port of the gRPC API.
	GRPC string `json:"grpc"`
	// rest is the URL of the model's REST API.
	REST string `json:"rest"`
}

// ModelServerList is a list of ModelServers.
// +kubebuilder:object:root=true
type ModelServerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ModelServer `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ModelServer{}, &ModelServerList{})
}
