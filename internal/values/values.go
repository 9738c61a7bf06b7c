// Package values turns a ModelServer into the values of the embedded chart.
// It is pure: no I/O, the same inputs always give the same values, and every
// decision about what to render is made here, not in the chart's templates.
package values

import (
	"path"
	"slices"

	corev1 "k8s.io/api/core/v1"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/fetchcontract"
	"github.com/modelserver-dev/modelserver-operator/internal/names"
	"github.com/modelserver-dev/modelserver-operator/internal/storageuri"
)

// For validates ms and builds its chart values: Validate, then
// Spec.Values.
func For(ms *servingv1alpha1.ModelServer, in Inputs) (*Values, error) {
	spec, err := Validate(ms)
	if err != nil {
		return nil, err
	}
	return spec.Values(in)
}

// Values builds the chart values of a validated spec. Its error is only
// ever a rendering failure that validation should have caught.
func (sp *Spec) Values(in Inputs) (*Values, error) {
	ms, spec := sp.ms, sp.ms.Spec
	grpc, rest := portOr(spec.Ports.GRPC, 8500), portOr(spec.Ports.REST, 8501)
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

	var pvcPath string
	v.Volume, pvcPath = volume(sp, v.Names.Claim)
	isPVC := !v.Volume.Create && !v.Volume.PerPod
	arch := archSelector(servingImage(spec), spec.PodTemplate)
	configs := modelsAndFetches(sp, v, in, pvcPath, arch)
	config, err := ModelConfig(configs)
	if err != nil {
		return nil, err
	}
	v.ConfigFiles[ModelConfigFile] = config

	if err := servingValues(sp, v, in, grpc, rest, configs); err != nil {
		return nil, err
	}
	v.Serving.NodeSelector = arch
	switch {
	case v.Volume.PerPod:
		v.ConfigFiles[PodFetchSettingsFile] = podFetchSettings(sp.FetchSettings())
		v.Serving.ModelFetches, v.Serving.FetchVolumes = podFetches(sp, in, configs, rollsAnyway(in, v.Serving.RestartChecksum, &v.Serving))
		v.ConfigFiles[PinsFile] = pins(in, configs)
	case !isPVC:
		// A pvc:// model is the user's data, there before the pods are.
		v.Serving.ModelWait = modelWait(in, configs)
	}
	svcType := spec.Service.Type
	if svcType == "" {
		svcType = corev1.ServiceTypeClusterIP
	}
	v.Service = Service{Type: svcType, Annotations: spec.Service.Annotations, TrafficDistribution: spec.Service.TrafficDistribution}
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
	exposure(ms, v, in)
	return v, nil
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

// userClaim is the location of a pvc:// model: its models are on the
// user's claim, and the operator makes no volume.
func userClaim(models []SpecModel) (storageuri.Location, bool) {
	loc, err := storageuri.Parse(models[0].StorageURI)
	return loc, err == nil && loc.Scheme == storageuri.SchemePVC
}

// volume is where the models live: the user's claim for pvc:// (mounted
// as it is, the path inside it, returned too, being the model), else a
// claim of our own where each generation is fetched into a directory of
// its own, so that serving pods keep the previous model until the new one
// is complete.
func volume(sp *Spec, claimName string) (Volume, string) {
	if loc, ok := userClaim(sp.Models); ok {
		return Volume{Create: false, ClaimName: loc.Claim}, path.Join(ModelsMountPath, path.Clean("/"+loc.Path))
	}
	storage := sp.ms.Spec.Storage
	vol := Volume{
		Create:     true,
		ClaimName:  claimName,
		Size:       defaultVolumeSize.String(),
		AccessMode: string(corev1.ReadWriteOnce),
	}
	if perPod(sp.ms) {
		vol.Create, vol.PerPod, vol.ClaimName = false, true, ""
	}
	if storage.Size != nil {
		vol.Size = storage.Size.String()
	}
	if storage.StorageClassName != nil {
		vol.StorageClassName = *storage.StorageClassName
	}
	if storage.AccessMode != "" {
		vol.AccessMode = string(storage.AccessMode)
	}
	return vol, ""
}

// modelsAndFetches fills in the models and their fetch Jobs, and returns
// the models the model config lists: those with data, or about to have it
// (pvcPath: the model on the user's claim, "" for none). New Jobs' pods
// keep to the serving pods' architecture (arch).
func modelsAndFetches(sp *Spec, v *Values, in Inputs, pvcPath string, arch map[string]string) []ModelEntry {
	var configs []ModelEntry
	for _, m := range sp.Models {
		generation, jobName := m.Generation, m.FetchJob
		dest := path.Join(ModelsMountPath, generation)
		if pvcPath != "" {
			dest = pvcPath
		}
		model := Model{Name: m.Name, StorageURI: m.StorageURI, FetchJob: jobName}
		served, ok := in.Served[m.Name]
		if !ok && sp.Source == SourceModel && !in.FailedFetches[m.Name] {
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
			if pvcPath != "" {
				model.BasePath = dest
			}
			configs = append(configs, ModelEntry{Name: m.Name, BasePath: model.BasePath, Policy: m.VersionPolicy, Labels: m.VersionLabels,
				Field: m.Field})
		}
		v.Models = append(v.Models, model)
		if !slices.ContainsFunc(v.Fetches, func(f Fetch) bool { return f.Generation == generation }) {
			prog, selector, readsConfig := in.job(generation, sp.ms.Spec.PodTemplate.NodeSelector, arch)
			// A pvc:// model is the user's, verified where it is; in
			// storage mode PerPod, the Job's volume is its own.
			readsConfig = readsConfig && pvcPath == "" && !v.Volume.PerPod
			pulls := pullSecrets(sp.ms, m.ModelSpec, sp.account.PullSecrets)
			settings := in.settings(generation, sp.FetchSettings())
			v.Fetches = append(v.Fetches, Fetch{
				Name:                     jobName,
				Generation:               generation,
				Image:                    prog.Image,
				Command:                  prog.Command,
				ImagePullPolicy:          corev1.PullIfNotPresent,
				Args:                     append(fetchArgs(m.ModelSpec, dest, webIdentitySession(sp.ms), pulls, readsConfig), volumeSizeArgs(sp.ms)...),
				Env:                      in.ProxyEnv,
				NodeSelector:             selector,
				PermanentFailureExitCode: fetchcontract.PermanentFailureExitCode,
				CredentialsSecret:        m.CredentialsSecret,
				WebIdentityAudience:      WebIdentityAudience(m.ModelSpec),
				PullSecrets:              pulls,
				ReadsModelConfig:         readsConfig,
				BackoffLimit:             2,
				ActiveDeadline:           settings.ActiveDeadline,
				Resources:                settings.Resources,
			})
		}
	}
	return configs
}

func portOr(p, def int32) int32 {
	if p == 0 {
		return def
	}
	return p
}
