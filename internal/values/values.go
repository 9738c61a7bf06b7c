// Package values turns a ModelServer into the values of the embedded chart.
// It is pure: no I/O, the same inputs always give the same values, and every
// decision about what to render is made here, not in the chart's templates.
package values

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/names"
)

// Labels every child carries besides the app.kubernetes.io/* set. The
// operator's caches select on LabelModelServer, since Helm forces
// app.kubernetes.io/managed-by to "Helm".
const (
	LabelModelServer = "serving.modelserver.dev/modelserver"
	LabelComponent   = "app.kubernetes.io/component"
)

// PermanentFailureExitCode is the exit code of `manager fetch` for a
// failure that retrying cannot fix; the fetch Job fails at once on it.
const PermanentFailureExitCode = 3

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
	Names       Names   `json:"names"`
	Owner       *Owner  `json:"owner,omitempty"`
	Labels      Labels  `json:"labels"`
	Model       Model   `json:"model"`
	Fetch       Fetch   `json:"fetch"`
	Volume      Volume  `json:"volume"`
	Serving     Serving `json:"serving"`
	Service     Service `json:"service"`
	Pod         Pod     `json:"pod"`
	ModelConfig string  `json:"modelConfig"`
}

// Names of the rendered objects (see package names).
type Names struct {
	Deployment string `json:"deployment"`
	Service    string `json:"service"`
	ConfigMap  string `json:"configMap"`
	Claim      string `json:"claim"`
	FetchJob   string `json:"fetchJob"`
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

// Model is what TF Serving serves.
type Model struct {
	Name       string `json:"name"`
	StorageURI string `json:"storageUri"`
	// BasePath is the model's directory inside the serving pods: the
	// directory holding the numbered version directories.
	BasePath string `json:"basePath"`
}

// Fetch is the model-fetch Job.
type Fetch struct {
	// Generation identifies the fetch inputs; it names the Job.
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

// Volume is where the model lives: a claim the chart creates, or the user's
// claim for pvc:// models.
type Volume struct {
	Create           bool   `json:"create"`
	ClaimName        string `json:"claimName"`
	Size             string `json:"size,omitempty"`
	StorageClassName string `json:"storageClassName,omitempty"`
	AccessMode       string `json:"accessMode,omitempty"`
}

// Serving is the TF Serving Deployment.
type Serving struct {
	Replicas        int32                       `json:"replicas"`
	Image           string                      `json:"image"`
	ImagePullPolicy corev1.PullPolicy           `json:"imagePullPolicy"`
	Resources       corev1.ResourceRequirements `json:"resources"`
	Env             []corev1.EnvVar             `json:"env,omitempty"`
	GRPCPort        int32                       `json:"grpcPort"`
	RESTPort        int32                       `json:"restPort"`
	// ConfigPollSeconds is --model_config_file_poll_wait_seconds: how often
	// TF Serving re-reads the model config.
	ConfigPollSeconds int32 `json:"configPollSeconds"`
}

// Service fronts the serving pods.
type Service struct {
	Type corev1.ServiceType `json:"type"`
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

// Inputs are what the values depend on besides the ModelServer's spec.
type Inputs struct {
	// ChartVersion and AppVersion of the embedded chart, for labels.
	ChartVersion, AppVersion string
	// FetchImage is the operator's own image, which runs `manager fetch`.
	FetchImage string
	// FetchedGeneration is the model generation whose fetch has succeeded,
	// empty if none has. The serving pods stay at zero replicas until one
	// has.
	FetchedGeneration string
	// ProxyEnv is the operator's HTTP(S)_PROXY/NO_PROXY, passed on to the
	// serving and fetch containers.
	ProxyEnv []corev1.EnvVar
}

// Error names the spec field that cannot be turned into values.
type Error struct {
	Field  string
	Reason string
}

func (e *Error) Error() string { return e.Field + ": " + e.Reason }

// For builds the chart values of ms. A spec the CRD schema admits always
// gives values; an *Error names the field otherwise.
func For(ms *servingv1alpha1.ModelServer, in Inputs) (*Values, error) {
	spec := ms.Spec
	if len(ms.Name) > servingv1alpha1.MaxNameLength {
		return nil, &Error{"metadata.name", fmt.Sprintf("must be at most %d characters", servingv1alpha1.MaxNameLength)}
	}
	if spec.Model.StorageURI == "" {
		return nil, &Error{"spec.model.storageUri", "is required"}
	}
	modelName := ModelName(ms)
	grpc, rest := portOr(spec.Ports.GRPC, 8500), portOr(spec.Ports.REST, 8501)
	if grpc == rest {
		return nil, &Error{"spec.ports", "grpc and rest must differ"}
	}

	generation := FetchGeneration(ms, in.FetchImage)
	v := &Values{
		Names: Names{
			Deployment: names.Deployment(ms.Name),
			Service:    names.Service(ms.Name),
			ConfigMap:  names.ConfigMap(ms.Name),
			Claim:      names.Claim(ms.Name),
			FetchJob:   names.FetchJob(ms.Name, generation),
		},
		Labels: labels(ms.Name, in.ChartVersion, in.AppVersion),
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
	servedGeneration := in.FetchedGeneration
	if servedGeneration == "" {
		servedGeneration = generation
	}
	var fetchDest string
	if claim, sub, ok := parsePVC(spec.Model.StorageURI); ok {
		v.Volume = Volume{Create: false, ClaimName: claim}
		fetchDest = path.Join(ModelsMountPath, path.Clean("/"+sub))
		v.Model.BasePath = fetchDest
	}
	if v.Model.BasePath == "" {
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
		fetchDest = path.Join(ModelsMountPath, generation)
		v.Model.BasePath = path.Join(ModelsMountPath, servedGeneration)
	}
	v.Model.Name = modelName
	v.Model.StorageURI = spec.Model.StorageURI

	v.Fetch = Fetch{
		Generation:               generation,
		Image:                    in.FetchImage,
		ImagePullPolicy:          corev1.PullIfNotPresent,
		Args:                     fetchArgs(spec.Model, fetchDest),
		Env:                      in.ProxyEnv,
		PermanentFailureExitCode: PermanentFailureExitCode,
		CredentialsSecret:        spec.Model.CredentialsSecret,
		BackoffLimit:             2,
		ActiveDeadline:           3600,
		Resources:                fetchResources(),
	}

	replicas := DesiredReplicas(ms)
	if replicas < 0 {
		return nil, &Error{"spec.replicas", "must not be negative"}
	}
	if in.FetchedGeneration == "" {
		// Nothing to serve yet: pods would only fail their probes.
		replicas = 0
	}
	image := spec.Image
	if image == "" {
		image = servingv1alpha1.DefaultImage
	}
	pullPolicy := spec.ImagePullPolicy
	if pullPolicy == "" {
		pullPolicy = corev1.PullIfNotPresent
	}
	v.Serving = Serving{
		Replicas:          replicas,
		Image:             image,
		ImagePullPolicy:   pullPolicy,
		Resources:         spec.Resources,
		Env:               append(append([]corev1.EnvVar(nil), spec.PodTemplate.Env...), in.ProxyEnv...),
		GRPCPort:          grpc,
		RESTPort:          rest,
		ConfigPollSeconds: 30,
	}
	svcType := spec.Service.Type
	if svcType == "" {
		svcType = corev1.ServiceTypeClusterIP
	}
	v.Service = Service{Type: svcType}
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
	for k := range pt.Labels {
		_, common := v.Labels.Common[k]
		_, selector := v.Labels.Selector[k]
		if common || selector {
			return nil, &Error{"spec.podTemplate.labels", fmt.Sprintf("%q is set by the operator", k)}
		}
	}

	config, err := ModelConfig(modelName, v.Model.BasePath, spec.Model.VersionPolicy, spec.Model.VersionLabels)
	if err != nil {
		return nil, err
	}
	v.ModelConfig = config
	return v, nil
}

// DesiredReplicas is the number of serving pods the spec asks for (the
// Deployment holds fewer while nothing is fetched yet).
func DesiredReplicas(ms *servingv1alpha1.ModelServer) int32 {
	if ms.Spec.Replicas == nil {
		return 1
	}
	return *ms.Spec.Replicas
}

// ModelName is the TF Serving model name: spec.model.name, else the
// ModelServer's name.
func ModelName(ms *servingv1alpha1.ModelServer) string {
	if ms.Spec.Model.Name != "" {
		return ms.Spec.Model.Name
	}
	return ms.Name
}

// FetchGeneration is a digest of everything the fetch Job's pod is made
// of. A Job's pod template is immutable, so a change to any of it needs a
// new Job, and a new Job means the model is fetched again.
func FetchGeneration(ms *servingv1alpha1.ModelServer, fetchImage string) string {
	pt := ms.Spec.PodTemplate
	parts := []string{
		fetchTemplateRevision,
		ms.Spec.Model.StorageURI,
		ms.Spec.Model.CredentialsSecret,
		canonical(ms.Spec.Model.MaxSizeBytes),
		fetchImage,
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
// Helm upgrade would change nothing. It is 40 hex digits (160 bits of
// SHA-256), short enough to be a label value on the release record.
func Digest(chartVersion string, v *Values) string {
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
