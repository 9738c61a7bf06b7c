package values

import (
	"encoding/json"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/fetchcontract"
)

// PinsFile is the serving ConfigMap's file that pins, in storage mode
// PerPod, what each served fetch generation must be: the pods' fetch
// containers read it at their start. It is not in the restart checksum:
// the pins of a generation come with the end of its fetch Job, which must
// not roll the pods that started with it and fetched their copies beside
// the Job.
const PinsFile = "model-pins.json"

// PodFetchSettingsFile is the serving ConfigMap's file of the settings
// the pods' fetch containers read at each start in storage mode PerPod
// (fetchcontract.PodFetchSettings), named by SettingsFlag: like PinsFile,
// it is not in the restart checksum, so that a new fetch timeout reaches
// the pods' next fetches without rolling them.
const PodFetchSettingsFile = "model-fetch.json"

// SettingsFlag names PodFetchSettingsFile to a serving pod's fetcher.
const SettingsFlag = "--settings"

// podFetchSettings is PodFetchSettingsFile: spec.fetch.timeout bounds
// each attempt of a pod's fetch as it bounds a fetch Job.
func podFetchSettings(s FetchSettings) string {
	b, _ := json.Marshal(fetchcontract.PodFetchSettings{Timeout: (time.Duration(s.ActiveDeadline) * time.Second).String()}) // Strings always marshal.
	// The chart writes each config file as a block scalar, which keeps
	// one final newline.
	return string(b) + "\n"
}

// Pin is what the fetch Job of a generation found, which the serving
// pods' own copies must match.
type Pin = fetchcontract.Pin

// PodFetchContainerName is the name of the serving pods' i-th fetch
// container in storage mode PerPod: the first, usually the only one, is
// "fetch-model", as kubectl logs -c wants it.
func PodFetchContainerName(i int) string {
	if i == 0 {
		return podFetchPrefix
	}
	return podFetchPrefix + "-" + strconv.Itoa(i)
}

// IsPodFetchContainer says that a serving pod's container is one of its
// fetch containers (PodFetchContainerName).
func IsPodFetchContainer(name string) bool {
	rest, ok := strings.CutPrefix(name, podFetchPrefix)
	if !ok {
		return false
	}
	if rest == "" {
		return true
	}
	n, err := strconv.Atoi(strings.TrimPrefix(rest, "-"))
	return strings.HasPrefix(rest, "-") && err == nil && n > 0
}

const podFetchPrefix = "fetch-model"

// PodFetch is a fetch container of the serving pods in storage mode
// PerPod: it fetches one model into the pod's own volume before TF Serving
// starts. Its volumes, those of its own prefixed with its name, are
// Serving.FetchVolumes.
type PodFetch struct {
	Name string `json:"name"`
	InitContainer
	Env          []corev1.EnvVar      `json:"env,omitempty"`
	VolumeMounts []corev1.VolumeMount `json:"volumeMounts"`
}

func perPod(ms *servingv1alpha1.ModelServer) bool {
	return ms.Spec.Storage.Mode == servingv1alpha1.StoragePerPod
}

// defaultVolumeSize is the model volume's size where spec.storage.size
// says none (the CRD's default).
var defaultVolumeSize = resource.MustParse("10Gi")

// perPodVolumeBytes is the size of each pod's and fetch Job's own volume
// in storage mode PerPod.
func perPodVolumeBytes(ms *servingv1alpha1.ModelServer) int64 {
	if s := ms.Spec.Storage.Size; s != nil {
		return s.Value()
	}
	return defaultVolumeSize.Value()
}

// volumeSizeArgs tell a fetch in storage mode PerPod the size of the
// volume it fetches into, an emptyDir whose file system is the node's: a
// model that does not fit fails TooLarge before it is downloaded, not by
// the pod's eviction half way.
func volumeSizeArgs(ms *servingv1alpha1.ModelServer) []string {
	if !perPod(ms) {
		return nil
	}
	return []string{"--volume-size", strconv.FormatInt(perPodVolumeBytes(ms), 10)}
}

// pins is the PinsFile of the served generations whose fetch found a
// digest.
func pins(in Inputs, configs []ModelEntry) string {
	out := map[string]Pin{}
	for _, c := range configs {
		gen := path.Base(c.BasePath)
		if p, ok := in.Pins[gen]; ok && p.Digest != "" {
			out[gen] = p
		}
	}
	b, _ := json.Marshal(out) // A map of strings always marshals.
	// The chart writes each config file as a block scalar, which keeps
	// one final newline.
	return string(b) + "\n"
}

// podFetches are the serving pods' fetch containers in storage mode
// PerPod, one per directory the model config serves from, and their
// volumes. A model served from its current generation is fetched as its
// fetch Job fetched it. One served from an older generation (its new one
// is being fetched, or was found to be the same model) keeps the pods'
// container that fetches it now: the spec no longer says how that
// generation was fetched, and changing the pods before the new fetch
// succeeds would roll them onto what is not verified yet. A container an
// earlier operator made without SettingsFlag, and otherwise the same, is
// kept without it unless the pods roll anyway (rolls): upgrading the
// operator restarts no serving pod.
func podFetches(sp *Spec, in Inputs, configs []ModelEntry, rolls bool) ([]PodFetch, []corev1.Volume) {
	var (
		fetches []PodFetch
		volumes []corev1.Volume
		done    []string
	)
	settings := sp.FetchSettings()
	for _, c := range configs {
		if slices.Contains(done, c.BasePath) {
			continue
		}
		done = append(done, c.BasePath)
		name := PodFetchContainerName(len(fetches))
		i := slices.IndexFunc(sp.Models, func(m SpecModel) bool { return m.Name == c.Name })
		m := sp.Models[i]
		if path.Base(c.BasePath) != m.Generation {
			if f, vols, ok := livePodFetch(in.LiveServingPod, c.BasePath, name); ok {
				fetches, volumes = append(fetches, f), append(volumes, vols...)
				continue
			}
		}
		pulls := pullSecrets(sp.ms, m.ModelSpec, sp.account.PullSecrets)
		args := append(fetchArgs(m.ModelSpec, c.BasePath, webIdentitySession(sp.ms), pulls, false),
			PinsFlag, path.Join(ConfigMountPath, PinsFile))
		args = append(args, volumeSizeArgs(sp.ms)...)
		live := liveInitContainer(in.LiveServingPod, name)
		if rolls || live == nil || !slices.Equal(live.Args, args) {
			args = append(args, SettingsFlag, path.Join(ConfigMountPath, PodFetchSettingsFile))
		}
		// Each container mounts its model's credentials at the paths the
		// args name, from volumes named after the container.
		f := PodFetch{
			Name:          name,
			InitContainer: initContainer(in, live, args),
			Env:           in.ProxyEnv,
			VolumeMounts: []corev1.VolumeMount{
				{Name: "model", MountPath: ModelsMountPath},
				{Name: "config", MountPath: ConfigMountPath, ReadOnly: true},
				{Name: "tmp", MountPath: "/tmp"},
			},
		}
		f.Resources = settings.Resources
		mount := func(suffix, at string, v corev1.VolumeSource) {
			volumes = append(volumes, corev1.Volume{Name: name + "-" + suffix, VolumeSource: v})
			f.VolumeMounts = append(f.VolumeMounts, corev1.VolumeMount{Name: name + "-" + suffix, MountPath: at, ReadOnly: true})
		}
		if s := m.CredentialsSecret; s != "" {
			mount("credentials", CredentialsMountPath, corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: s, DefaultMode: ptr.To[int32](0o440),
			}})
		}
		if len(pulls) > 0 {
			mount("pull-secrets", PullSecretsMountPath, corev1.VolumeSource{Projected: pullSecretsProjection(pulls)})
		}
		if aud := WebIdentityAudience(m.ModelSpec); aud != "" {
			mount("web-identity", path.Dir(WebIdentityTokenPath), corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				DefaultMode: ptr.To[int32](0o440),
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
					Audience: aud, ExpirationSeconds: ptr.To[int64](3600), Path: path.Base(WebIdentityTokenPath),
				}}},
			}})
		}
		fetches = append(fetches, f)
	}
	return fetches, volumes
}

// PinsFlag names the pins file to the fetcher of a serving pod (PinsFile).
const PinsFlag = "--pins"

// pullSecretsProjection is the fetch Job's pull-secrets volume (the
// chart's fetch-job.yaml), for a serving pod's fetch container.
func pullSecretsProjection(pulls []string) *corev1.ProjectedVolumeSource {
	p := &corev1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](0o440)}
	for _, s := range pulls {
		p.Sources = append(p.Sources, corev1.VolumeProjection{Secret: &corev1.SecretProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: s},
			Optional:             ptr.To(true),
			Items: []corev1.KeyToPath{
				{Key: corev1.DockerConfigJsonKey, Path: s + "/" + corev1.DockerConfigJsonKey},
				{Key: corev1.DockerConfigKey, Path: s + "/" + corev1.DockerConfigKey},
			},
		}})
	}
	return p
}

// liveInitContainer is the init container name of the live serving pod
// template, nil if there is none, as initContainer keeps its image.
func liveInitContainer(pod *corev1.PodSpec, name string) *InitContainer {
	if pod == nil {
		return nil
	}
	for _, c := range pod.InitContainers {
		if c.Name == name {
			return &InitContainer{Image: c.Image, Command: c.Command, Args: c.Args}
		}
	}
	return nil
}

// livePodFetch is the live serving pod template's fetch container whose
// --dest is dest, and the volumes of its own, renamed for the container's
// new name.
func livePodFetch(pod *corev1.PodSpec, dest, name string) (PodFetch, []corev1.Volume, bool) {
	if pod == nil {
		return PodFetch{}, nil, false
	}
	for _, c := range pod.InitContainers {
		if !IsPodFetchContainer(c.Name) || PodFetchDest(c) != dest {
			continue
		}
		f := PodFetch{
			Name: name,
			InitContainer: InitContainer{
				Image: c.Image, ImagePullPolicy: c.ImagePullPolicy, Command: c.Command, Args: c.Args, Resources: c.Resources,
			},
			Env: c.Env,
		}
		var vols []corev1.Volume
		for _, vm := range c.VolumeMounts {
			if suffix, own := strings.CutPrefix(vm.Name, c.Name+"-"); own {
				i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == vm.Name })
				if i < 0 {
					return PodFetch{}, nil, false
				}
				v := *pod.Volumes[i].DeepCopy()
				v.Name = name + "-" + suffix
				vols = append(vols, v)
				vm.Name = v.Name
			}
			f.VolumeMounts = append(f.VolumeMounts, vm)
		}
		return f, vols, true
	}
	return PodFetch{}, nil, false
}

// PodFetchDest is the directory a serving pod's fetch container c
// fetches into, its --dest; "" if it names none.
func PodFetchDest(c corev1.Container) string { return argValue(c.Args, "--dest") }

// argValue is the value following flag in args, "" if none.
func argValue(args []string, flag string) string {
	i := slices.Index(args, flag)
	if i < 0 || i+1 >= len(args) {
		return ""
	}
	return args[i+1]
}
