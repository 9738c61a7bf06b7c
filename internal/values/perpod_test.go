package values

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

func perPodServer(mutate ...func(*servingv1alpha1.ModelServer)) *servingv1alpha1.ModelServer {
	return modelServer(append([]func(*servingv1alpha1.ModelServer){func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Storage.Mode = servingv1alpha1.StoragePerPod
		ms.Spec.Model.CredentialsSecret = "s3-creds"
	}}, mutate...)...)
}

func mustValues(t *testing.T, ms *servingv1alpha1.ModelServer, in Inputs) *Values {
	t.Helper()
	v, err := For(ms, in)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// livePod is the serving pod template the values render, as the
// Deployment would hold it.
func livePod(v *Values) *corev1.PodSpec {
	ps := &corev1.PodSpec{Volumes: v.Serving.FetchVolumes}
	for _, f := range v.Serving.ModelFetches {
		ps.InitContainers = append(ps.InitContainers, corev1.Container{
			Name: f.Name, Image: f.Image, Command: f.Command, Args: f.Args, Env: f.Env, Resources: f.Resources,
			ImagePullPolicy: f.ImagePullPolicy, VolumeMounts: f.VolumeMounts,
		})
	}
	return ps
}

// TestTheEndOfTheFirstFetchPinsTheModelWithoutRollingThePods: the pods of
// a new ModelServer fetch their copies beside the Job; when it ends, its
// digest is pinned in the ConfigMap for the pods to come, and nothing of
// the pod template changes.
func TestTheEndOfTheFirstFetchPinsTheModelWithoutRollingThePods(t *testing.T) {
	ms := perPodServer()
	base := Inputs{ChartVersion: "0.1.0", AppVersion: "2.19.1", FetchImage: "example.com/op:1"}
	first := mustValues(t, ms, base)
	gen := first.Fetches[0].Generation
	if first.Volume.Create || !first.Volume.PerPod || first.Serving.ModelWait != nil {
		t.Fatalf("volume %+v, wait-for-model %+v: want no claim and no wait in storage mode PerPod", first.Volume, first.Serving.ModelWait)
	}
	if len(first.Serving.ModelFetches) != 1 {
		t.Fatalf("fetch containers %+v, want one", first.Serving.ModelFetches)
	}
	f := first.Serving.ModelFetches[0]
	if f.Name != "fetch-model" || argValue(f.Args, "--dest") != "/models/"+gen || argValue(f.Args, PinsFlag) != "/etc/modelserver/"+PinsFile ||
		argValue(f.Args, "--uri") != "s3://models/resnet" || argValue(f.Args, "--credentials-dir") != CredentialsMountPath {
		t.Errorf("fetch container %s args %q", f.Name, f.Args)
	}
	if slices.Contains(first.Fetches[0].Args, ServedConfigFlag) {
		t.Errorf("the Job prunes a volume of its own: %q", first.Fetches[0].Args)
	}
	for _, args := range [][]string{first.Fetches[0].Args, f.Args} {
		if argValue(args, "--volume-size") != "10737418240" {
			t.Errorf("args %q do not give the emptyDir's size, 10Gi", args)
		}
	}
	expect(t, "pins while the Job fetches", first.ConfigFiles[PinsFile], "{}\n")

	done := base
	done.Served = map[string]string{"resnet": gen}
	done.Pins = map[string]Pin{gen: {Digest: "sha256:abc"}, "elsewhere": {Digest: "sha256:other"}}
	done.LiveServingPod = livePod(first)
	after := mustValues(t, ms, done)
	expect(t, "pins once fetched", after.ConfigFiles[PinsFile], `{"`+gen+`":{"digest":"sha256:abc"}}`+"\n")
	if after.Serving.RestartChecksum != first.Serving.RestartChecksum ||
		!apiequality.Semantic.DeepEqual(after.Serving.ModelFetches, first.Serving.ModelFetches) ||
		!apiequality.Semantic.DeepEqual(after.Serving.FetchVolumes, first.Serving.FetchVolumes) {
		t.Errorf("the pod template changed with the end of the fetch:\n%+v\n%+v", first.Serving, after.Serving)
	}
}

// TestANewModelLeavesThePodsFetchingTheServedOneUntilItIsVerified: while
// a new URI is fetched, the pods keep fetching the generation they serve
// as they did, though the spec no longer says how; once it is fetched,
// they roll onto it.
func TestANewModelLeavesThePodsFetchingTheServedOneUntilItIsVerified(t *testing.T) {
	base := Inputs{ChartVersion: "0.1.0", AppVersion: "2.19.1", FetchImage: "example.com/op:1"}
	old := perPodServer()
	oldGen := FetchGeneration(old, *old.Spec.Model)
	base.Served = map[string]string{"resnet": oldGen}
	base.Pins = map[string]Pin{oldGen: {Digest: "sha256:old"}}
	serving := mustValues(t, old, base)

	moved := perPodServer(func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Model.StorageURI = "gs://elsewhere/resnet"
		ms.Spec.Model.CredentialsSecret = "gcs"
	})
	in := base
	in.LiveServingPod = livePod(serving)
	during := mustValues(t, moved, in)
	if during.Serving.RestartChecksum != serving.Serving.RestartChecksum ||
		!apiequality.Semantic.DeepEqual(during.Serving.ModelFetches, serving.Serving.ModelFetches) ||
		!apiequality.Semantic.DeepEqual(during.Serving.FetchVolumes, serving.Serving.FetchVolumes) {
		t.Errorf("the pods changed before the new model was fetched:\n%+v\n%+v", serving.Serving.ModelFetches, during.Serving.ModelFetches)
	}
	if argValue(during.Fetches[0].Args, "--uri") != "gs://elsewhere/resnet" {
		t.Errorf("the Job fetches %q", during.Fetches[0].Args)
	}

	newGen := during.Fetches[0].Generation
	in.Served = map[string]string{"resnet": newGen}
	in.Pins = map[string]Pin{newGen: {Digest: "sha256:new"}}
	after := mustValues(t, moved, in)
	f := after.Serving.ModelFetches[0]
	if argValue(f.Args, "--uri") != "gs://elsewhere/resnet" || argValue(f.Args, "--dest") != "/models/"+newGen {
		t.Errorf("fetch container args %q, want the new model", f.Args)
	}
	if after.Serving.RestartChecksum == serving.Serving.RestartChecksum {
		t.Error("the new model does not roll the pods")
	}
	if s := after.Serving.FetchVolumes[0].Secret; s == nil || s.SecretName != "gcs" {
		t.Errorf("volumes %+v, want the new credentials", after.Serving.FetchVolumes)
	}

	// The Deployment lost (deleted by hand): made again from the spec,
	// fetching the served generation's directory, pinned to its digest.
	in = base
	in.LiveServingPod = nil
	remade := mustValues(t, moved, in)
	if argValue(remade.Serving.ModelFetches[0].Args, "--dest") != "/models/"+oldGen {
		t.Errorf("remade fetch container args %q", remade.Serving.ModelFetches[0].Args)
	}
}

// TestAnOperatorUpgradeKeepsThePodsFetchers: a fetch container whose args
// are the same keeps its image, as wait-for-model does.
func TestAnOperatorUpgradeKeepsThePodsFetchers(t *testing.T) {
	ms := perPodServer()
	in := Inputs{FetchImage: "example.com/op:1", Served: map[string]string{"resnet": FetchGeneration(ms, *ms.Spec.Model)}}
	was := mustValues(t, ms, in)
	in.FetchImage, in.LiveServingPod = "example.com/op:2", livePod(was)
	expect(t, "image after the upgrade", mustValues(t, ms, in).Serving.ModelFetches[0].Image, "example.com/op:1")
	in.LiveServingPod = nil
	expect(t, "image of new pods", mustValues(t, ms, in).Serving.ModelFetches[0].Image, "example.com/op:2")
}

func TestPodFetchContainerNames(t *testing.T) {
	for i, want := range []string{"fetch-model", "fetch-model-1", "fetch-model-12"} {
		if got := PodFetchContainerName(map[int]int{0: 0, 1: 1, 2: 12}[i]); got != want || !IsPodFetchContainer(got) {
			t.Errorf("name %d = %q, want %q, a fetch container's", i, got, want)
		}
	}
	for _, other := range []string{"fetch", "fetch-model-0", "fetch-model-x", "fetch-modelx", "wait-for-model", "tensorflow-serving"} {
		if IsPodFetchContainer(other) {
			t.Errorf("%q counts as a fetch container", other)
		}
	}
}

func TestPerPodIsRefusedForAClaimsModel(t *testing.T) {
	expectRefused(t, perPodServer(func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Model.StorageURI, ms.Spec.Model.CredentialsSecret = "pvc://models/resnet", ""
	}), "spec.storage.mode", "pvc://")
}

// TestTheVolumeSizeIsPartOfAPerPodFetchGeneration: the Job is told the
// size of its volume, so a new size needs a new Job.
func TestTheVolumeSizeIsPartOfAPerPodFetchGeneration(t *testing.T) {
	ms := perPodServer()
	bigger := perPodServer(func(ms *servingv1alpha1.ModelServer) { ms.Spec.Storage.Size = ptr.To(resource.MustParse("20Gi")) })
	if FetchGeneration(ms, *ms.Spec.Model) == FetchGeneration(bigger, *bigger.Spec.Model) {
		t.Error("a PerPod fetch generation does not change with spec.storage.size")
	}
	shared := modelServer()
	sharedBigger := modelServer(func(ms *servingv1alpha1.ModelServer) { ms.Spec.Storage.Size = ptr.To(resource.MustParse("20Gi")) })
	if FetchGeneration(shared, *shared.Spec.Model) != FetchGeneration(sharedBigger, *sharedBigger.Spec.Model) {
		t.Error("a Shared fetch generation changes with spec.storage.size: the claim grows in place")
	}
}

// TestAPodsFetchTakesSpecFetchTimeoutWithoutRolling: spec.fetch.timeout
// bounds each attempt of a pod's fetch as it bounds a fetch Job. The pods
// read it from the ConfigMap at each start, so a new timeout changes no
// pod; pods an earlier operator started without the settings file keep
// running as they are until they roll anyway.
func TestAPodsFetchTakesSpecFetchTimeoutWithoutRolling(t *testing.T) {
	timeout := func(d time.Duration) func(*servingv1alpha1.ModelServer) {
		return func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Fetch = &servingv1alpha1.FetchSpec{Timeout: &metav1.Duration{Duration: d}}
		}
	}
	in := Inputs{FetchImage: "example.com/op:1", Served: map[string]string{"resnet": FetchGeneration(perPodServer(), *perPodServer().Spec.Model)}}
	first := mustValues(t, perPodServer(), in)
	expect(t, "the settings file", first.ConfigFiles[PodFetchSettingsFile], `{"timeout":"1h0m0s"}`+"\n")
	if f := first.Serving.ModelFetches[0]; argValue(f.Args, SettingsFlag) != ConfigMountPath+"/"+PodFetchSettingsFile {
		t.Errorf("fetch container args %q, want the settings file named", f.Args)
	}
	deployed := func(v *Values, in Inputs) Inputs {
		ps := livePod(v)
		ps.Containers = []corev1.Container{{Name: ServingContainerName, Image: v.Serving.Image, Args: v.Serving.Args, Resources: v.Serving.Resources}}
		in.LiveServingPod, in.LiveRestartChecksum = ps, v.Serving.RestartChecksum
		return in
	}

	longer := mustValues(t, perPodServer(timeout(90*time.Minute)), deployed(first, in))
	expect(t, "the settings file of a longer timeout", longer.ConfigFiles[PodFetchSettingsFile], `{"timeout":"1h30m0s"}`+"\n")
	if longer.Serving.RestartChecksum != first.Serving.RestartChecksum || !apiequality.Semantic.DeepEqual(longer.Serving.ModelFetches, first.Serving.ModelFetches) {
		t.Errorf("a new timeout changed the pods:\n%+v\n%+v", first.Serving.ModelFetches, longer.Serving.ModelFetches)
	}

	// The Deployment as an operator before the settings file rendered it.
	earlier := mustValues(t, perPodServer(), in)
	f := &earlier.Serving.ModelFetches[0]
	i := slices.Index(f.Args, SettingsFlag)
	f.Args = slices.Delete(slices.Clone(f.Args), i, i+2)
	upgraded := in
	upgraded.FetchImage = "example.com/op:2"
	kept := mustValues(t, perPodServer(), deployed(earlier, upgraded)).Serving.ModelFetches[0]
	if !slices.Equal(kept.Args, f.Args) || kept.Image != "example.com/op:1" {
		t.Errorf("an earlier operator's pod fetch became %s %q; want it as it runs, %s %q", kept.Image, kept.Args, f.Image, f.Args)
	}
	rolled := mustValues(t, perPodServer(func(ms *servingv1alpha1.ModelServer) { ms.Spec.Image = "tensorflow/serving:2.19.2" }), deployed(earlier, upgraded))
	if f := rolled.Serving.ModelFetches[0]; argValue(f.Args, SettingsFlag) == "" || f.Image != "example.com/op:2" {
		t.Errorf("pods that roll anyway fetch with %s %q; want the settings file and the new image", f.Image, f.Args)
	}
}
