package values

import (
	"cmp"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/fetchcontract"
	"github.com/modelserver-dev/modelserver-operator/internal/names"
	"github.com/modelserver-dev/modelserver-operator/internal/storageuri"
)

// FetchGeneration is a digest of everything the fetch Job's pod is made
// of but the operator's image. A Job's pod template is immutable, so a
// change to any of it needs a new Job, and a new Job means the model is
// fetched again. The image is left out so that upgrading the operator
// fetches nothing again: a Job keeps the image and command it was made
// with (Inputs.LiveJobs).
//
// Two models with the same fetch inputs share a generation, and so one Job
// and one copy of the data.
func FetchGeneration(ms *servingv1alpha1.ModelServer, m servingv1alpha1.ModelSpec) string {
	return fetchGeneration(ms, m, nil)
}

// fetchGeneration is FetchGeneration for pods whose service account has
// the image pull secrets accountPulls.
func fetchGeneration(ms *servingv1alpha1.ModelServer, m servingv1alpha1.ModelSpec, accountPulls []string) string {
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
	if perPod(ms) {
		// The fetch is told the volume's size (volumeSizeArgs).
		parts = append(parts, "per-pod", strconv.FormatInt(perPodVolumeBytes(ms), 10))
	}
	if m.Signature != nil {
		parts = append(parts, "signature", canonical(m.Signature.PublicKeys), m.Signature.Repository)
	}
	if m.Refetch != "" {
		parts = append(parts, "refetch", m.Refetch)
	}
	if v := VersionsOf(m.VersionPolicy).String(); v != VersionsOf(nil).String() {
		// The default's generations keep the names they had before the
		// fetch took only the served versions: upgrading the operator
		// fetches none of them again.
		parts = append(parts, "versions", v)
	}
	if w := m.WebIdentity; w != nil {
		parts = append(parts, "web-identity", w.RoleARN, WebIdentityAudience(m))
		if w.Provider != "" {
			parts = append(parts, w.Provider, w.ServiceAccount)
		}
		if w.ClientID != "" || w.TenantID != "" {
			parts = append(parts, "entra", w.ClientID, w.TenantID)
		}
		if w.EKSPodIdentity {
			parts = append(parts, "eks-pod-identity")
		}
		if w.GKEWorkloadIdentity {
			parts = append(parts, "gke-workload-identity", w.ServiceAccount)
		}
	}
	if pulls := pullSecrets(ms, m, accountPulls); len(pulls) > 0 {
		// The Job mounts them: a Job made before it did must be replaced.
		parts = append(parts, "pull-secrets-mounted")
		if len(pt.ImagePullSecrets) == 0 {
			parts = append(parts, "service-account", strings.Join(pulls, ","))
		}
	}
	return names.Hash(parts...)
}

// pullSecrets are the image pull secrets an oci:// model's fetch reads
// registry credentials from, after its credentials Secret's: the serving
// pods', once each, so that the registry credentials already given for
// the pods' images serve their model's image too. Those are the pod
// template's, or, where it names none, its service account's
// (accountPulls), as the ServiceAccount admission plugin gives a pod.
func pullSecrets(ms *servingv1alpha1.ModelServer, m servingv1alpha1.ModelSpec, accountPulls []string) []string {
	if !fromRegistry(m) {
		return nil
	}
	names := accountPulls
	if len(ms.Spec.PodTemplate.ImagePullSecrets) > 0 {
		names = nil
		for _, s := range ms.Spec.PodTemplate.ImagePullSecrets {
			names = append(names, s.Name)
		}
	}
	var out []string
	for _, n := range names {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// fromRegistry says that m is an oci:// model, whose fetch reads the
// pods' image pull secrets.
func fromRegistry(m servingv1alpha1.ModelSpec) bool {
	loc, err := storageuri.Parse(m.StorageURI)
	return err == nil && loc.Scheme == storageuri.SchemeOCI
}

// NeedsServiceAccount says whether ms's fetch reads the pods' service
// account (Account), and which account that is: for an oci:// model's
// image pull secrets, where the pod template names none, and for the role
// of a webIdentity that names none.
func NeedsServiceAccount(ms *servingv1alpha1.ModelServer) (string, bool) {
	pt := ms.Spec.PodTemplate
	models := ms.Spec.Models
	if ms.Spec.Model != nil {
		models = append([]servingv1alpha1.ModelSpec{*ms.Spec.Model}, models...)
	}
	if slices.ContainsFunc(models, takesAccountRole) || (len(pt.ImagePullSecrets) == 0 && slices.ContainsFunc(models, fromRegistry)) {
		return podsServiceAccount(ms), true
	}
	return "", false
}

// fetchTemplateRevision is part of every fetch generation. Bump it with any
// change to the chart's fetch Job template that changes the rendered pod
// template, unless existing Jobs are rendered as they were made (LiveJob,
// as the model config's mount is): a Job's pod template is immutable, so
// such a chart needs new Job names (and fetches each model again).
const fetchTemplateRevision = "1"

// VersionsFlag tells the fetcher which version directories to copy
// (fetchcontract.Versions).
const VersionsFlag = "--versions"

// ServedConfigFlag names the model config to the fetcher, whose models it
// must leave on the volume (Fetch.ReadsModelConfig).
const ServedConfigFlag = "--served-config"

// takesAccountRole says that model m's fetch takes the identity its
// service account is annotated with: an s3:// model's webIdentity that
// names no role, an Azure model's that names no application or tenant, a
// gs:// model's of GKE's metadata server (which impersonates the Google
// service account the account is annotated with).
func takesAccountRole(m servingv1alpha1.ModelSpec) bool {
	w := m.WebIdentity
	switch {
	case w == nil:
		return false
	case w.GKEWorkloadIdentity:
		return strings.HasPrefix(m.StorageURI, "gs://") || fromRegistry(m)
	case strings.HasPrefix(m.StorageURI, "s3://"):
		return w.RoleARN == "" && !w.EKSPodIdentity
	}
	return (w.ClientID == "" || w.TenantID == "") && isAzure(m)
}

// isAzure says that model m is in Azure Blob Storage.
func isAzure(m servingv1alpha1.ModelSpec) bool {
	loc, err := storageuri.Parse(m.StorageURI)
	return err == nil && loc.Scheme == storageuri.SchemeAzure
}

// DefaultWebIdentityAudience is the audience of the token an s3:// model's
// fetch assumes its role with, where spec.model.webIdentity names none:
// the one EKS's IAM roles for service accounts use.
const DefaultWebIdentityAudience = "sts.amazonaws.com"

// EKSPodIdentityAudience is the audience of the token the EKS Pod Identity
// Agent takes.
const EKSPodIdentityAudience = "pods.eks.amazonaws.com"

// DefaultEntraAudience is the audience of the token an Azure model's fetch
// signs in with: the one Entra's federated credentials expect by default.
const DefaultEntraAudience = "api://AzureADTokenExchange"

// WebIdentityAudience is the audience of the token model m's fetch
// reads as (webIdentity); "" when it has none. A federation provider's
// default is its own name, as Google Cloud allows it.
func WebIdentityAudience(m servingv1alpha1.ModelSpec) string {
	switch w := m.WebIdentity; {
	case w == nil || w.GKEWorkloadIdentity:
		// The metadata server knows the pod by its address, not a token.
		return ""
	case w.Provider != "":
		return cmp.Or(w.Audience, "https://iam.googleapis.com/"+w.Provider)
	case isAzure(m):
		return cmp.Or(w.Audience, DefaultEntraAudience)
	case w.EKSPodIdentity:
		return EKSPodIdentityAudience
	default:
		return cmp.Or(w.Audience, DefaultWebIdentityAudience)
	}
}

// webIdentitySession names the STS session of ms's fetches, as the
// store's audit log shows it: at most 64 characters of [\w+=,.@-].
func webIdentitySession(ms *servingv1alpha1.ModelServer) string {
	s := "modelserver-" + ms.Namespace + "-" + ms.Name
	if len(s) > 64 {
		s = s[:55] + "-" + names.Hash(ms.Namespace, ms.Name)[:8]
	}
	return s
}

func fetchArgs(m servingv1alpha1.ModelSpec, dest, session string, pulls []string, readsConfig bool) []string {
	args := []string{"fetch"}
	if readsConfig {
		args = append(args, ServedConfigFlag, path.Join(ConfigMountPath, ModelConfigFile))
	}
	if v := VersionsOf(m.VersionPolicy); !v.All() {
		args = append(args, VersionsFlag, v.String())
	}
	args = append(args, "--uri", m.StorageURI, "--dest", dest)
	if m.CredentialsSecret != "" {
		args = append(args, "--credentials-dir", CredentialsMountPath)
	}
	switch w := m.WebIdentity; {
	case w == nil:
	case w.Provider != "":
		args = append(args, "--web-identity-provider", w.Provider, "--web-identity-token-file", WebIdentityTokenPath)
		if w.ServiceAccount != "" {
			args = append(args, "--web-identity-service-account", w.ServiceAccount)
		}
	case w.ClientID != "":
		args = append(args, "--web-identity-client-id", w.ClientID, "--web-identity-tenant-id", w.TenantID, "--web-identity-token-file", WebIdentityTokenPath)
	case w.EKSPodIdentity:
		args = append(args, "--eks-pod-identity", "--web-identity-token-file", WebIdentityTokenPath)
	case w.GKEWorkloadIdentity:
		args = append(args, "--gke-workload-identity")
		if w.ServiceAccount != "" {
			args = append(args, "--web-identity-service-account", w.ServiceAccount)
		}
	default:
		args = append(args, "--web-identity-role-arn", w.RoleARN, "--web-identity-token-file", WebIdentityTokenPath,
			"--web-identity-session-name", session)
	}
	if len(pulls) > 0 {
		args = append(args, "--pull-secrets-dir", PullSecretsMountPath, "--pull-secrets", strings.Join(pulls, ","))
	}
	if m.Signature != nil {
		for _, k := range m.Signature.PublicKeys {
			args = append(args, "--signature-key", k)
		}
		if r := m.Signature.Repository; r != "" {
			args = append(args, "--signature-repository", r)
		}
	}
	if m.MaxSizeBytes != nil {
		args = append(args, "--max-bytes", strconv.FormatInt(*m.MaxSizeBytes, 10))
	}
	return args
}

// DefaultFetchTimeout is how long a model's fetch may take where
// spec.fetch.timeout does not say.
const DefaultFetchTimeout = time.Hour

// FetchSettings are what spec.fetch sets on a model-fetch Job. Unlike the
// fetch inputs, they are not part of the fetch generation: a change
// fetches nothing again. A Job keeps the resources it was made with (its
// pod template cannot change), and, once its fetch has ended, its
// deadline; a failed one made with other settings is made again
// (NeedsRetry).
type FetchSettings struct {
	// ActiveDeadline is the Job's activeDeadlineSeconds.
	ActiveDeadline int64
	// Resources are the fetch container's.
	Resources corev1.ResourceRequirements
}

// FetchSettings are the settings spec.fetch asks of the fetch Jobs.
func (sp *Spec) FetchSettings() FetchSettings {
	s := FetchSettings{ActiveDeadline: seconds(DefaultFetchTimeout), Resources: fetchResources()}
	if f := sp.ms.Spec.Fetch; f != nil {
		if f.Timeout != nil {
			s.ActiveDeadline = seconds(f.Timeout.Duration)
		}
		if f.Resources != nil {
			s.Resources = *f.Resources.DeepCopy()
		}
	}
	return s
}

// seconds is d in whole seconds, a fraction counted as one more.
func seconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

// NeedsRetry says that a failed Job made with these settings is made
// again with want: its fetch may fare better with more time or memory, or
// with what else its user changed.
func (s FetchSettings) NeedsRetry(want FetchSettings) bool {
	return s.ActiveDeadline != want.ActiveDeadline || !sameResources(s.Resources, want.Resources)
}

// settings are the settings a generation's Job is rendered with: want,
// but for what its existing Job keeps.
func (in Inputs) settings(generation string, want FetchSettings) FetchSettings {
	j, ok := in.LiveJobs[generation]
	if !ok || j.Image == "" {
		return want
	}
	s := want
	if !sameResources(j.Settings.Resources, want.Resources) {
		s.Resources = j.Settings.Resources
	}
	if j.Finished {
		s.ActiveDeadline = j.Settings.ActiveDeadline
	}
	return s
}

// sameResources compares quantities by value: the apiserver keeps them in
// its own form ("1" for "1000m"), which must not count as a change.
func sameResources(a, b corev1.ResourceRequirements) bool {
	return apiequality.Semantic.DeepEqual(a, b)
}

func fetchResources() corev1.ResourceRequirements {
	return requestsAndMemoryLimit("100m", "128Mi", "512Mi")
}

// requestsAndMemoryLimit are the resources of a container of the
// operator's image: a request of each, for a quota that wants them, and a
// memory limit; no CPU limit, which would only slow it.
func requestsAndMemoryLimit(cpu, memory, memoryLimit string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(cpu),
			corev1.ResourceMemory: resource.MustParse(memory),
		},
		Limits: corev1.ResourceList{
			corev1.ResourceMemory: resource.MustParse(memoryLimit),
		},
	}
}

// job is what a fetch generation's Job runs, what its pod's node selector
// adds to the pod's (podSelector), and whether it reads the model config:
// what it was made with if it exists, else the fetcher of the operator's
// image, the serving pods' architecture (arch), and the model config.
func (in Inputs) job(generation string, podSelector, arch map[string]string) (Program, map[string]string, bool) {
	if j := in.LiveJobs[generation]; j.Image != "" {
		return j.Program, beyond(j.NodeSelector, podSelector), j.ReadsModelConfig
	}
	return in.fetcher(), arch, true
}

// fetcher is the fetcher of the operator's image, which new fetch Jobs and
// serving pods run.
func (in Inputs) fetcher() Program {
	return Program{Image: in.FetchImage, Command: []string{fetchcontract.FetcherCommand}}
}
