package values

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/imagesig"
	"github.com/modelserver-dev/modelserver-operator/internal/names"
	"github.com/modelserver-dev/modelserver-operator/internal/storageuri"
)

// Source is the spec field a ModelServer's models come from.
type Source string

// The two sources of models.
const (
	SourceModel  Source = "spec.model"
	SourceModels Source = "spec.models"
)

// SpecModel is one model of a validated spec.
type SpecModel struct {
	// ModelSpec is the model as the spec has it, its name defaulted to
	// the ModelServer's for spec.model.
	servingv1alpha1.ModelSpec
	// Field names it in messages: spec.model or spec.models[i].
	Field string
	// Generation identifies its fetch inputs (FetchGeneration) and its
	// refresh round, and FetchJob names the Job fetching that generation.
	Generation, FetchJob string
	// BaseGeneration identifies its fetch inputs alone, and Round is the
	// refresh round its fetch is in, zero for none (Spec.InRound).
	BaseGeneration string
	Round          time.Time
}

// Spec is a ModelServer whose spec passed Validate: only a Spec is turned
// into values.
type Spec struct {
	ms *servingv1alpha1.ModelServer
	// account is what the pods' service account gives (ValidateWith).
	account Account
	Source  Source
	Models  []SpecModel
	// DesiredReplicas is the number of serving pods the spec asks for.
	DesiredReplicas int32
}

// AllFetched is Inputs.Served as it is once every model's current fetch
// has succeeded: each model served from its current generation.
func (sp *Spec) AllFetched() map[string]string {
	served := map[string]string{}
	for _, m := range sp.Models {
		served[m.Name] = m.Generation
	}
	return served
}

// Validate checks everything about ms that can stop it from becoming a
// release, in one pass and before anything is built: what the CRD's schema
// cannot say (or says only for new objects), such as pod settings the
// apiserver would refuse on a pod, or a storage URI the fetcher would
// refuse. The *Error names the first field at fault.
func Validate(ms *servingv1alpha1.ModelServer) (*Spec, error) {
	return ValidateWith(ms, Account{})
}

// Account is what the pods' service account gives them, and their fetch,
// beside its name (NeedsServiceAccount).
type Account struct {
	// PullSecrets are its image pull secrets: where the pod template
	// names none, the kubelet uses the account's, and so does an oci://
	// model's fetch.
	PullSecrets []string
	// RoleARN and Audience are its AnnotationRoleARN and
	// AnnotationRoleAudience: the role a spec.model.webIdentity that
	// names none assumes.
	RoleARN, Audience string
	// ClientID and TenantID are its AnnotationClientID and
	// AnnotationTenantID: the Entra application an Azure model's
	// webIdentity that names none signs in as.
	ClientID, TenantID string
	// GoogleServiceAccount is its AnnotationGoogleServiceAccount: the
	// Google service account GKE's metadata server reads a gs:// model
	// as, for a webIdentity of gkeWorkloadIdentity.
	GoogleServiceAccount string
}

// The annotations of a service account that name the identity its pods
// take: the IAM role, as EKS's IAM roles for service accounts (and
// eksctl) set them; the Entra application, as Microsoft Entra Workload ID
// does; the Google service account GKE's metadata server impersonates.
const (
	AnnotationRoleARN      = "eks.amazonaws.com/role-arn"
	AnnotationRoleAudience = "eks.amazonaws.com/audience"
	AnnotationClientID     = "azure.workload.identity/client-id"
	AnnotationTenantID     = "azure.workload.identity/tenant-id"

	AnnotationGoogleServiceAccount = "iam.gke.io/gcp-service-account"
)

// AccountAnnotations are the annotations of a service account that
// ValidateWith reads (Account).
var AccountAnnotations = []string{AnnotationRoleARN, AnnotationRoleAudience, AnnotationClientID, AnnotationTenantID, AnnotationGoogleServiceAccount}

// ValidateWith is Validate for pods whose service account gives account.
func ValidateWith(ms *servingv1alpha1.ModelServer, account Account) (*Spec, error) {
	if len(ms.Name) > servingv1alpha1.MaxNameLength {
		return nil, &Error{"metadata.name", fmt.Sprintf("must be at most %d characters", servingv1alpha1.MaxNameLength)}
	}
	models, source, err := specModels(ms, account)
	if err != nil {
		return nil, err
	}
	spec := ms.Spec
	if err := checkUTF8(ms, models); err != nil {
		return nil, err
	}
	for _, m := range models {
		loc, err := storageuri.Parse(m.StorageURI)
		if err != nil {
			return nil, &Error{m.Field + ".storageUri", uriProblem(err)}
		}
		if err := checkSignature(m, loc); err != nil {
			return nil, err
		}
		if err := checkWebIdentity(ms, m, loc); err != nil {
			return nil, err
		}
		if why := refreshRefused(m.ModelSpec, loc); why != "" {
			return nil, &Error{m.Field + ".refreshInterval", why}
		}
	}
	if portOr(spec.Ports.GRPC, 8500) == portOr(spec.Ports.REST, 8501) {
		return nil, &Error{"spec.ports", "grpc and rest must differ"}
	}
	for _, m := range models {
		if err := checkVersions(m.Field, m.VersionPolicy, m.VersionLabels); err != nil {
			return nil, err
		}
	}
	if err := checkServing(spec); err != nil {
		return nil, err
	}
	if err := checkExtraArgs(spec.ExtraArgs, spec.TLS != nil); err != nil {
		return nil, err
	}
	if err := checkResources(field.NewPath("spec", "resources"), spec.Resources); err != nil {
		return nil, err
	}
	if f := spec.Fetch; f != nil && f.Resources != nil {
		if err := checkResources(field.NewPath("spec", "fetch", "resources"), *f.Resources); err != nil {
			return nil, err
		}
	}
	if err := checkPodTemplate(spec.PodTemplate); err != nil {
		return nil, err
	}
	_, pvc := userClaim(models)
	if err := checkObjectSettings(spec, !pvc); err != nil {
		return nil, err
	}
	if err := checkLabelsAdded(ms); err != nil {
		return nil, err
	}
	return &Spec{ms: ms, account: account, Source: source, Models: models, DesiredReplicas: DesiredReplicas(ms)}, nil
}

// checkLabelsAdded refuses labels the spec adds to the operator's own on
// the pods or the ServiceMonitor where they would set one of those again:
// a pod's would take over the Service's selector, and the chart would
// write the key twice.
func checkLabelsAdded(ms *servingv1alpha1.ModelServer) error {
	added := []keyValues{{"spec.podTemplate.labels", ms.Spec.PodTemplate.Labels}}
	if sm := ms.Spec.Monitoring.ServiceMonitor; sm != nil {
		added = append(added, keyValues{"spec.monitoring.serviceMonitor.labels", sm.Labels})
	}
	reserved := labels(ms.Name, "", "")
	for _, a := range added {
		for k := range a.kv {
			_, common := reserved.Common[k]
			_, selector := reserved.Selector[k]
			if common || selector {
				return &Error{a.field, fmt.Sprintf("%q is set by the operator", k)}
			}
		}
	}
	return nil
}

// uriProblem is what the URI parser says is wrong, without the URI: the
// field is named instead.
func uriProblem(err error) string {
	var uerr *storageuri.Error
	if errors.As(err, &uerr) {
		return uerr.Problem
	}
	return err.Error()
}

// checkServing refuses serving settings that contradict each other.
func checkServing(spec servingv1alpha1.ModelServerSpec) error {
	pt := spec.PodTemplate
	if ptr.Deref(pt.DrainSeconds, 5) >= ptr.Deref(pt.TerminationGracePeriodSeconds, 30) {
		return &Error{"spec.podTemplate.drainSeconds", "must be less than terminationGracePeriodSeconds"}
	}
	if b := spec.Batching; b != nil {
		if err := checkBatching(b); err != nil {
			return err
		}
	}
	if mon := spec.Monitoring; mon.Enabled != nil && !*mon.Enabled && mon.ServiceMonitor != nil {
		return &Error{"spec.monitoring.serviceMonitor", "needs spec.monitoring.enabled"}
	}
	if ptr.Deref(spec.Replicas, 1) < 0 {
		return &Error{"spec.replicas", "must not be negative"}
	}
	a := spec.Autoscaling
	if a == nil {
		return nil
	}
	if spec.Replicas != nil {
		return &Error{"spec.replicas", "must not be set together with spec.autoscaling"}
	}
	if ptr.Deref(a.MinReplicas, 1) > a.MaxReplicas {
		return &Error{"spec.autoscaling.minReplicas", "must not exceed maxReplicas"}
	}
	if a.TargetCPUUtilizationPercentage == nil && a.TargetMemoryUtilizationPercentage == nil && len(a.Metrics) == 0 {
		return &Error{"spec.autoscaling", "needs targetCPUUtilizationPercentage, targetMemoryUtilizationPercentage or metrics"}
	}
	if err := checkMetrics(a.Metrics); err != nil {
		return err
	}
	return checkBehavior(a.Behavior)
}

// ModelNames are the names of the models ms serves, defaulted as the
// model config has them.
func ModelNames(ms *servingv1alpha1.ModelServer) []string {
	if m := ms.Spec.Model; m != nil {
		return []string{cmp.Or(m.Name, ms.Name)}
	}
	names := make([]string, 0, len(ms.Spec.Models))
	for _, m := range ms.Spec.Models {
		names = append(names, m.Name)
	}
	return names
}

// specModels are the models ms serves, with their names defaulted, and
// the spec field they come from.
func specModels(ms *servingv1alpha1.ModelServer, account Account) ([]SpecModel, Source, error) {
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
		if strings.HasPrefix(m.StorageURI, "pvc://") && perPod(ms) {
			return nil, "", &Error{"spec.storage.mode", "PerPod does not apply to a pvc:// model: every pod reads the model from that claim"}
		}
		return []SpecModel{specModel(ms, m, string(SourceModel), account)}, SourceModel, nil
	case len(spec.Models) > 0:
		models := make([]SpecModel, 0, len(spec.Models))
		seen := map[string]bool{}
		for i, m := range spec.Models {
			field := fmt.Sprintf("spec.models[%d]", i)
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
			models = append(models, specModel(ms, m, field, account))
		}
		return models, SourceModels, nil
	}
	return nil, "", &Error{"spec.model", "is required (or spec.models)"}
}

// specModel is model m of ms, from the spec field named field, with its
// fetch generation and the Job fetching it. A webIdentity that names no
// role is the service account's: the role its annotation names.
func specModel(ms *servingv1alpha1.ModelServer, m servingv1alpha1.ModelSpec, field string, account Account) SpecModel {
	if takesAccountRole(m) {
		taken := *m.WebIdentity
		switch {
		case isAzure(m):
			taken.ClientID, taken.TenantID = cmp.Or(taken.ClientID, account.ClientID), cmp.Or(taken.TenantID, account.TenantID)
		case taken.GKEWorkloadIdentity:
			// Not a choice: what the fetch checks the metadata server
			// answers as.
			taken.ServiceAccount = account.GoogleServiceAccount
		default:
			taken.RoleARN, taken.Audience = account.RoleARN, cmp.Or(taken.Audience, account.Audience)
		}
		m.WebIdentity = &taken
	}
	generation := fetchGeneration(ms, m, account.PullSecrets)
	return SpecModel{ModelSpec: m, Field: field, Generation: generation, BaseGeneration: generation, FetchJob: names.FetchJob(ms.Name, generation)}
}

// checkPodTemplate refuses pod labels, annotations, node selectors,
// tolerations, affinities, topology spread constraints and environment
// variables the apiserver would refuse on the pods. The CRD schema cannot
// say it, and Helm would otherwise create part of the release before the
// Deployment is refused.
func checkPodTemplate(pt servingv1alpha1.PodTemplate) error {
	if err := checkTolerations(pt.Tolerations); err != nil {
		return err
	}
	if err := checkAffinity(pt.Affinity); err != nil {
		return err
	}
	if err := checkSpread(pt.TopologySpreadConstraints); err != nil {
		return err
	}
	for _, m := range []keyValues{{"spec.podTemplate.labels", pt.Labels}, {"spec.podTemplate.nodeSelector", pt.NodeSelector}} {
		if errs := metav1validation.ValidateLabels(m.kv, field.NewPath(m.field)); len(errs) > 0 {
			return &Error{m.field, firstError(errs)}
		}
	}
	if errs := apivalidation.ValidateAnnotations(pt.Annotations, field.NewPath("spec.podTemplate.annotations")); len(errs) > 0 {
		return &Error{"spec.podTemplate.annotations", firstError(errs)}
	}
	return checkEnv(pt.Env)
}

// badValue is msg about value, the value quoted and cut short.
func badValue(value, msg string) string {
	return fmt.Sprintf("%.100q: %s", value, msg)
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
		msg = badValue(s, msg)
	}
	if len(errs) > 1 {
		msg += fmt.Sprintf(" (and %d more)", len(errs)-1)
	}
	return msg
}

// checkUTF8 refuses strings that are not UTF-8 in the fields that reach
// the manifests: JSON, and so the apiserver, would silently replace their
// bytes, and what ran would not be what the spec says.
func checkUTF8(ms *servingv1alpha1.ModelServer, models []SpecModel) error {
	type check struct{ field, value string }
	spec := ms.Spec
	fields := []check{
		{"spec.image", spec.Image},
		{"spec.podTemplate.serviceAccountName", spec.PodTemplate.ServiceAccountName},
	}
	for _, m := range models {
		fields = append(fields, check{m.Field + ".name", m.Name}, check{m.Field + ".storageUri", m.StorageURI},
			check{m.Field + ".credentialsSecret", m.CredentialsSecret})
	}
	for k, v := range spec.PodTemplate.Annotations {
		fields = append(fields, check{"spec.podTemplate.annotations", k + v})
	}
	for i, e := range spec.PodTemplate.Env {
		fields = append(fields, check{fmt.Sprintf("spec.podTemplate.env[%d]", i), e.Name + e.Value})
	}
	for i, a := range spec.ExtraArgs {
		fields = append(fields, check{fmt.Sprintf("spec.extraArgs[%d]", i), a})
	}
	for _, f := range fields {
		if !utf8.ValidString(f.value) {
			return &Error{f.field, "must be valid UTF-8"}
		}
	}
	return nil
}

// roleARN is the CRD's pattern of spec.model.webIdentity.roleArn.
var roleARN = regexp.MustCompile(`^arn:[a-z0-9-]+:iam:[^:]*:[0-9]*:role/[\x21-\x7e]+$`)

// checkWebIdentity refuses a role the fetch could not assume (past the
// CRD's rules, which only new objects meet): of a model not in S3, Cloud
// Storage or Azure; for S3, none (the spec names none, nor does the
// service account) unless it takes its EKS Pod Identity association's,
// or not an IAM role's ARN; for Cloud Storage, no federation provider;
// for Azure, no Entra application and tenant.
func checkWebIdentity(ms *servingv1alpha1.ModelServer, m SpecModel, loc storageuri.Location) error {
	w := m.WebIdentity
	switch {
	case w == nil:
		return nil
	case loc.Scheme == storageuri.SchemeGCS:
		return checkFederation(ms, m)
	case loc.Scheme == storageuri.SchemeAzure:
		return checkEntraApplication(ms, m)
	case loc.Scheme == storageuri.SchemeOCI && w.GKEWorkloadIdentity:
		return checkGoogleRegistry(ms, m, loc)
	case loc.Scheme != storageuri.SchemeS3:
		return &Error{m.Field + ".webIdentity", "applies to s3://, gs:// and Azure Blob Storage models, and with gkeWorkloadIdentity to oci:// models in Artifact Registry, only"}
	case w.Provider != "" || w.ServiceAccount != "" || w.ClientID != "" || w.TenantID != "" || w.GKEWorkloadIdentity:
		return &Error{m.Field + ".webIdentity", "of an s3:// model names an IAM role (roleArn), not a provider, a service account, GKE's metadata server or an Entra application"}
	case w.EKSPodIdentity && (w.RoleARN != "" || w.Audience != ""):
		return &Error{m.Field + ".webIdentity.eksPodIdentity", "takes the role and the audience of the service account's association: name neither"}
	case w.EKSPodIdentity:
		return nil
	case w.RoleARN == "":
		return unannotated(ms, m.Field+".webIdentity.roleArn", AnnotationRoleARN)
	case !roleARN.MatchString(w.RoleARN):
		return &Error{m.Field + ".webIdentity.roleArn", fmt.Sprintf("%q is not a role's ARN: arn:aws:iam::<account>:role/<name>", w.RoleARN)}
	}
	return nil
}

// federationProvider is the CRD's pattern of spec.model.webIdentity.provider.
var federationProvider = regexp.MustCompile(`^projects/[0-9]+/locations/global/workloadIdentityPools/[a-z0-9-]+/providers/[a-z0-9-]+$`)

// googleServiceAccount is a Google service account's email, as the CRD's
// pattern of spec.model.webIdentity.serviceAccount has it.
var googleServiceAccount = regexp.MustCompile(`^[a-z0-9-]+@[a-z0-9.-]+\.iam\.gserviceaccount\.com$`)

// checkFederation refuses a gs:// model's webIdentity without a provider
// (or GKE's metadata server), or with a role; and, for GKE's, a provider
// or audience beside it, or a service account annotation that does not
// name a Google service account.
func checkFederation(ms *servingv1alpha1.ModelServer, m SpecModel) error {
	w := m.WebIdentity
	switch {
	case w.RoleARN != "" || w.ClientID != "" || w.TenantID != "" || w.EKSPodIdentity:
		return &Error{m.Field + ".webIdentity", "of a gs:// model names its Workload Identity Federation provider, or gkeWorkloadIdentity: true, not an IAM role, an EKS Pod Identity association or an Entra application"}
	case w.GKEWorkloadIdentity && (w.Provider != "" || w.Audience != ""):
		return &Error{m.Field + ".webIdentity.gkeWorkloadIdentity", "reads the model as GKE's metadata server identifies the pods: name no provider or audience"}
	case w.GKEWorkloadIdentity && w.ServiceAccount != "" && !googleServiceAccount.MatchString(w.ServiceAccount):
		return &Error{m.Field + ".webIdentity.gkeWorkloadIdentity", fmt.Sprintf("service account %q is annotated %s: %.100q, which is not a Google service account's email (<name>@<project>.iam.gserviceaccount.com)", podsServiceAccount(ms), AnnotationGoogleServiceAccount, w.ServiceAccount)}
	case w.GKEWorkloadIdentity:
		return nil
	case !federationProvider.MatchString(w.Provider):
		return &Error{m.Field + ".webIdentity.provider", fmt.Sprintf("%q is not a Workload Identity Federation provider: projects/<number>/locations/global/workloadIdentityPools/<pool>/providers/<provider>", w.Provider)}
	}
	return nil
}

// checkGoogleRegistry refuses GKE's metadata server for an oci:// model
// in a registry not Google's, which is never given its tokens, or beside
// another identity.
func checkGoogleRegistry(ms *servingv1alpha1.ModelServer, m SpecModel, loc storageuri.Location) error {
	w := m.WebIdentity
	switch {
	case !storageuri.GoogleRegistry(loc.Registry()):
		return &Error{m.Field + ".webIdentity.gkeWorkloadIdentity", fmt.Sprintf("reads oci:// models in Artifact Registry (<location>-docker.pkg.dev) or Container Registry (gcr.io) only: GKE's tokens are not given to %s", loc.Registry())}
	case w.RoleARN != "" || w.ClientID != "" || w.TenantID != "" || w.EKSPodIdentity:
		return &Error{m.Field + ".webIdentity", "of an oci:// model is gkeWorkloadIdentity alone"}
	}
	return checkFederation(ms, m)
}

// entraClientID is the CRD's pattern of spec.model.webIdentity.clientId.
var entraClientID = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// checkEntraApplication refuses an Azure model's webIdentity without an
// application or its tenant (the spec names none, nor does the service
// account), or with another cloud's identity.
func checkEntraApplication(ms *servingv1alpha1.ModelServer, m SpecModel) error {
	w := m.WebIdentity
	switch {
	case w.RoleARN != "" || w.Provider != "" || w.ServiceAccount != "" || w.EKSPodIdentity || w.GKEWorkloadIdentity:
		return &Error{m.Field + ".webIdentity", "of an Azure Blob Storage model names a Microsoft Entra application (clientId, tenantId), not an IAM role, a provider, a service account or GKE's metadata server"}
	case w.ClientID == "":
		return unannotated(ms, m.Field+".webIdentity.clientId", AnnotationClientID)
	case !entraClientID.MatchString(w.ClientID):
		return &Error{m.Field + ".webIdentity.clientId", fmt.Sprintf("%q is not an application's client ID (a GUID)", w.ClientID)}
	case w.TenantID == "":
		return unannotated(ms, m.Field+".webIdentity.tenantId", AnnotationTenantID)
	}
	return nil
}

// unannotated is the error of a webIdentity field that neither the spec
// nor the pods' service account, by its annotation, gives.
func unannotated(ms *servingv1alpha1.ModelServer, field, annotation string) *Error {
	return &Error{field, fmt.Sprintf("is not set, and service account %q has no %s annotation to take it from", podsServiceAccount(ms), annotation)}
}

// podsServiceAccount is the service account ms's pods run as.
func podsServiceAccount(ms *servingv1alpha1.ModelServer) string {
	return cmp.Or(ms.Spec.PodTemplate.ServiceAccountName, "default")
}

// checkSignature refuses what the fetcher could not check a model's
// signature with: keys that do not read, or a model not in a registry
// (past the CRD's rule, which only new objects meet).
func checkSignature(m SpecModel, loc storageuri.Location) error {
	if m.Signature == nil {
		return nil
	}
	field := m.Field + ".signature"
	if loc.Scheme != storageuri.SchemeOCI {
		return &Error{field, "applies to oci:// models only: their signatures are in their registry"}
	}
	if len(m.Signature.PublicKeys) == 0 {
		return &Error{field + ".publicKeys", "is required: the keys a signature may be made with"}
	}
	if r := m.Signature.Repository; r != "" {
		if problem := storageuri.CheckRepository(r); problem != "" {
			return &Error{field + ".repository", problem}
		}
	}
	if _, err := imagesig.ParseKeys(m.Signature.PublicKeys); err != nil {
		var ke *imagesig.KeyError
		if errors.As(err, &ke) {
			return &Error{fmt.Sprintf("%s.publicKeys[%d]", field, ke.Index), ke.Err.Error()}
		}
		return &Error{field + ".publicKeys", err.Error()}
	}
	return nil
}
