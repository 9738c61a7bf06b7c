package values

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/fetchcontract"
	"github.com/modelserver-dev/modelserver-operator/internal/imagesig/sigtest"
)

func modelServer(mutate ...func(*servingv1alpha1.ModelServer)) *servingv1alpha1.ModelServer {
	ms := &servingv1alpha1.ModelServer{
		ObjectMeta: metav1.ObjectMeta{Name: "resnet", Namespace: "ml", UID: "uid-1"},
		Spec: servingv1alpha1.ModelServerSpec{
			Model:    &servingv1alpha1.ModelSpec{StorageURI: "s3://models/resnet"},
			Replicas: ptr.To[int32](2),
		},
	}
	for _, m := range mutate {
		m(ms)
	}
	return ms
}

// expectRefused fails the test unless ms is refused with an *Error
// naming field, whose reason says want.
func expectRefused(t *testing.T, ms *servingv1alpha1.ModelServer, field, want string) {
	t.Helper()
	_, err := Validate(ms)
	e, ok := err.(*Error)
	if !ok {
		t.Fatalf("Validate = %v, want an *Error naming %s", err, field)
	}
	if e.Field != field || !strings.Contains(e.Reason, want) {
		t.Errorf("Validate = %s: %s\nwant      %s: …%s…", e.Field, e.Reason, field, want)
	}
}

var fetched = Inputs{ChartVersion: "0.1.0", AppVersion: "2.19.1", FetchImage: "example.com/op:1", Served: map[string]string{"resnet": "gen00001"}}

func TestValuesForASpec(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ms    *servingv1alpha1.ModelServer
		in    Inputs
		check func(t *testing.T, v *Values)
	}{{
		name: "defaults",
		ms:   modelServer(),
		in:   fetched,
		check: func(t *testing.T, v *Values) {
			expect(t, "model name", v.Models[0].Name, "resnet")
			expect(t, "image", v.Serving.Image, servingv1alpha1.DefaultImage)
			expect(t, "replicas", v.Serving.Replicas, int32(2))
			expect(t, "grpc", v.Serving.GRPCPort, int32(8500))
			expect(t, "rest", v.Serving.RESTPort, int32(8501))
			expect(t, "service type", v.Service.Type, corev1.ServiceTypeClusterIP)
			expect(t, "claim created", v.Volume.Create, true)
			expect(t, "claim", v.Volume.ClaimName, "resnet-model")
			expect(t, "size", v.Volume.Size, "10Gi")
			expect(t, "served base path", v.Models[0].BasePath, "/models/gen00001")
			expect(t, "owner uid", v.Owner.UID, "uid-1")
			expect(t, "deployment", v.Names.Deployment, "resnet")
			expect(t, "config map", v.Names.ConfigMap, "resnet-config")
			if !strings.HasPrefix(v.Fetches[0].Name, "resnet-fetch-") || v.Models[0].FetchJob != v.Fetches[0].Name {
				t.Errorf("fetch job %q, model's %q", v.Fetches[0].Name, v.Models[0].FetchJob)
			}
			expect(t, "fetch dest", v.Fetches[0].Args[len(v.Fetches[0].Args)-1], "/models/"+v.Fetches[0].Generation)
		},
	}, {
		name: "the first fetch starts the serving pods, which wait for its data",
		ms:   modelServer(),
		in:   Inputs{ChartVersion: "0.1.0", AppVersion: "2.19.1", FetchImage: "example.com/op:1"},
		check: func(t *testing.T, v *Values) {
			dest := "/models/" + v.Fetches[0].Generation
			expect(t, "replicas", v.Serving.Replicas, int32(2))
			expect(t, "base path", v.Models[0].BasePath, dest)
			if v.Serving.ModelWait == nil {
				t.Fatal("no wait-for-model init container")
			}
			expect(t, "wait image", v.Serving.ModelWait.Image, "example.com/op:1")
			expect(t, "wait args", strings.Join(v.Serving.ModelWait.Args, " "), "wait-for-model --file "+dest+"/"+fetchcontract.ManifestName)
		},
	}, {
		name: "a failed first fetch holds the serving pods at zero",
		ms:   modelServer(),
		in:   Inputs{ChartVersion: "0.1.0", AppVersion: "2.19.1", FetchImage: "example.com/op:1", FailedFetches: map[string]bool{"resnet": true}},
		check: func(t *testing.T, v *Values) {
			expect(t, "replicas", v.Serving.Replicas, int32(0))
			expect(t, "base path", v.Models[0].BasePath, "")
			if strings.Contains(v.ConfigFiles[ModelConfigFile], "config {") {
				t.Errorf("a model without data is in the model config:\n%s", v.ConfigFiles[ModelConfigFile])
			}
			if v.Serving.ModelWait != nil {
				t.Errorf("the pods wait for a failed fetch: %+v", v.Serving.ModelWait)
			}
		},
	}, {
		name: "several models wait for a first fetch at zero replicas",
		ms: modelServer(func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model = nil
			ms.Spec.Models = []servingv1alpha1.ModelSpec{{Name: "a", StorageURI: "s3://models/a"}, {Name: "b", StorageURI: "s3://models/b"}}
		}),
		in: Inputs{ChartVersion: "0.1.0", AppVersion: "2.19.1", FetchImage: "example.com/op:1"},
		check: func(t *testing.T, v *Values) {
			expect(t, "replicas", v.Serving.Replicas, int32(0))
			if v.Serving.ModelWait != nil {
				t.Errorf("pods wait with no model configured: %+v", v.Serving.ModelWait)
			}
		},
	}, {
		name: "a new generation keeps serving the fetched one",
		ms:   modelServer(func(ms *servingv1alpha1.ModelServer) { ms.Spec.Model.StorageURI = "s3://models/resnet-v2" }),
		in:   fetched,
		check: func(t *testing.T, v *Values) {
			expect(t, "replicas", v.Serving.Replicas, int32(2))
			expect(t, "served base path", v.Models[0].BasePath, "/models/gen00001")
			if v.Fetches[0].Generation == "gen00001" {
				t.Error("the new URI did not make a new generation")
			}
		},
	}, {
		name: "pvc:// mounts the user's claim and creates none",
		ms:   modelServer(func(ms *servingv1alpha1.ModelServer) { ms.Spec.Model.StorageURI = "pvc://shared-models/vision/resnet" }),
		in:   fetched,
		check: func(t *testing.T, v *Values) {
			expect(t, "claim created", v.Volume.Create, false)
			expect(t, "claim", v.Volume.ClaimName, "shared-models")
			expect(t, "base path", v.Models[0].BasePath, "/models/vision/resnet")
			if v.Serving.ModelWait != nil {
				t.Errorf("the pods wait for the user's own data: %+v", v.Serving.ModelWait)
			}
		},
	}, {
		name: "pvc:// path cannot climb out of the mount",
		ms:   modelServer(func(ms *servingv1alpha1.ModelServer) { ms.Spec.Model.StorageURI = "pvc://claim/../../etc" }),
		in:   fetched,
		check: func(t *testing.T, v *Values) {
			expect(t, "base path", v.Models[0].BasePath, "/models/etc")
		},
	}, {
		name: "everything set",
		ms: modelServer(func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.Name = "my_model.v2"
			ms.Spec.Model.CredentialsSecret = "s3-creds"
			ms.Spec.Image = "example.com/tfs:custom"
			ms.Spec.Ports = servingv1alpha1.Ports{GRPC: 9000, REST: 9001}
			ms.Spec.Service.Type = corev1.ServiceTypeNodePort
			ms.Spec.Storage = servingv1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("50Gi")), StorageClassName: ptr.To("fast"), AccessMode: corev1.ReadWriteMany}
			ms.Spec.PodTemplate.ServiceAccountName = "tfs"
			ms.Spec.PodTemplate.Env = []corev1.EnvVar{{Name: "TF_CPP_MIN_LOG_LEVEL", Value: "2"}}
		}),
		in: Inputs{ChartVersion: "0.1.0", AppVersion: "2.19.1", FetchImage: "example.com/op:1", Served: map[string]string{"my_model.v2": "g"}, ProxyEnv: []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://proxy:3128"}}},
		check: func(t *testing.T, v *Values) {
			expect(t, "model name", v.Models[0].Name, "my_model.v2")
			expect(t, "image", v.Serving.Image, "example.com/tfs:custom")
			expect(t, "grpc", v.Serving.GRPCPort, int32(9000))
			expect(t, "service", v.Service.Type, corev1.ServiceTypeNodePort)
			expect(t, "size", v.Volume.Size, "50Gi")
			expect(t, "class", v.Volume.StorageClassName, "fast")
			expect(t, "access", v.Volume.AccessMode, "ReadWriteMany")
			expect(t, "sa", v.Pod.ServiceAccountName, "tfs")
			expect(t, "secret", v.Fetches[0].CredentialsSecret, "s3-creds")
			expect(t, "env", len(v.Serving.Env), 3)
			expect(t, "proxy env after the spec's", v.Serving.Env[1].Name, "HTTPS_PROXY")
			expect(t, "the CPU limit last", v.Serving.Env[2].Name, CPULimitEnv)
			if !strings.Contains(strings.Join(v.Fetches[0].Args, " "), "--credentials-dir "+CredentialsMountPath) {
				t.Errorf("fetch args lack the credentials dir: %q", v.Fetches[0].Args)
			}
			if !strings.Contains(v.ConfigFiles[ModelConfigFile], `name: "my_model.v2"`) {
				t.Errorf("model config:\n%s", v.ConfigFiles[ModelConfigFile])
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := For(tc.ms, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, v)
		})
	}
}

func TestBadSpecsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ms    *servingv1alpha1.ModelServer
		field string
	}{
		{"same ports", modelServer(func(ms *servingv1alpha1.ModelServer) { ms.Spec.Ports = servingv1alpha1.Ports{GRPC: 9000, REST: 9000} }), "spec.ports"},
		{"negative replicas", modelServer(func(ms *servingv1alpha1.ModelServer) { ms.Spec.Replicas = ptr.To[int32](-1) }), "spec.replicas"},
		{"no uri", modelServer(func(ms *servingv1alpha1.ModelServer) { ms.Spec.Model.StorageURI = "" }), "spec.model.storageUri"},
		// Past the CRD's rules: a registry without a dot or a port would be
		// read as a Docker Hub repository.
		{"oci:// registry that reads as a repository", modelServer(func(ms *servingv1alpha1.ModelServer) { ms.Spec.Model.StorageURI = "oci://registry/m:v1" }), "spec.model.storageUri"},
		{"long name", modelServer(func(ms *servingv1alpha1.ModelServer) { ms.Name = strings.Repeat("a", 60) }), "metadata.name"},
		{"operator label", modelServer(func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.PodTemplate.Labels = map[string]string{LabelModelServer: "other"}
		}), "spec.podTemplate.labels"},
		{"label key with spaces", modelServer(func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.PodTemplate.Labels = map[string]string{"team name": "a"}
		}), "spec.podTemplate.labels"},
		{"label value too long", modelServer(func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.PodTemplate.Labels = map[string]string{"team": strings.Repeat("a", 64)}
		}), "spec.podTemplate.labels"},
		{"node selector value with a slash", modelServer(func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.PodTemplate.NodeSelector = map[string]string{"zone": "a/b"}
		}), "spec.podTemplate.nodeSelector"},
		{"annotations over 256 KiB", modelServer(func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.PodTemplate.Annotations = map[string]string{"big": strings.Repeat("x", 300<<10)}
		}), "spec.podTemplate.annotations"},
		{"env name with '='", modelServer(func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.PodTemplate.Env = []corev1.EnvVar{{Name: "A=B", Value: "c"}}
		}), "spec.podTemplate.env[0].name"},
		{"empty specific versions", modelServer(func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.VersionPolicy = &servingv1alpha1.VersionPolicy{Specific: &servingv1alpha1.SpecificVersions{}}
		}), "spec.model.versionPolicy.specific.versions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := For(tc.ms, fetched)
			var ve *Error
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v, want a *values.Error", err)
			}
			if ve.Field != tc.field {
				t.Errorf("field %q, want %q (%v)", ve.Field, tc.field, err)
			}
		})
	}
}

func TestDigestChangesWithValuesAndChartVersion(t *testing.T) {
	a, _ := For(modelServer(), fetched)
	b, _ := For(modelServer(), fetched)
	c, _ := For(modelServer(func(ms *servingv1alpha1.ModelServer) { ms.Spec.Image = "example.com/other:1" }), fetched)
	if Digest("0.1.0", a) != Digest("0.1.0", b) {
		t.Error("equal values, different digests")
	}
	if Digest("0.1.0", a) == Digest("0.1.0", c) {
		t.Error("a changed image kept the digest")
	}
	if Digest("0.1.0", a) == Digest("0.2.0", a) {
		t.Error("a new chart version kept the digest")
	}
	if d := Digest("0.1.0", a); len(d) > 63 {
		t.Errorf("digest %q does not fit a label value", d)
	}
}

func generation(ms *servingv1alpha1.ModelServer) string {
	return FetchGeneration(ms, *ms.Spec.Model)
}

func TestFetchGenerationIgnoresServingOnlyChanges(t *testing.T) {
	base := generation(modelServer())
	if g := generation(modelServer(func(ms *servingv1alpha1.ModelServer) { ms.Spec.Replicas = ptr.To[int32](5); ms.Spec.Image = "x:1" })); g != base {
		t.Error("replicas or image changed the fetch generation: the model would be fetched again for nothing")
	}
	for name, m := range map[string]func(*servingv1alpha1.ModelServer){
		"uri":         func(ms *servingv1alpha1.ModelServer) { ms.Spec.Model.StorageURI = "s3://other" },
		"secret":      func(ms *servingv1alpha1.ModelServer) { ms.Spec.Model.CredentialsSecret = "c" },
		"annotations": func(ms *servingv1alpha1.ModelServer) { ms.Spec.PodTemplate.Annotations = map[string]string{"a": "b"} },
		"refetch":     func(ms *servingv1alpha1.ModelServer) { ms.Spec.Model.Refetch = "run-2" },
	} {
		if generation(modelServer(m)) == base {
			t.Errorf("a change of %s kept the fetch generation: its Job's pod template would have to change in place", name)
		}
	}
}

// TestAnOCIModelsFetchReadsThePodsImagePullSecrets: an oci:// model's
// Job mounts the serving pods' image pull secrets, once each, and is a
// new Job when they are added (a Job's pod template is immutable); other
// schemes' Jobs do not mount them, and keep their generation.
func TestAnOCIModelsFetchReadsThePodsImagePullSecrets(t *testing.T) {
	withPulls := func(uri string) func(*servingv1alpha1.ModelServer) {
		return func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.StorageURI = uri
			ms.Spec.PodTemplate.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}, {Name: "mirror"}, {Name: "regcred"}}
		}
	}
	const oci = "oci://registry.example.com/models/resnet:v1"
	v, err := For(modelServer(withPulls(oci)), fetched)
	if err != nil {
		t.Fatal(err)
	}
	expectStrings(t, "pull secrets", v.Fetches[0].PullSecrets, []string{"regcred", "mirror"})
	if args := strings.Join(v.Fetches[0].Args, " "); !strings.Contains(args, "--pull-secrets-dir "+PullSecretsMountPath+" --pull-secrets regcred,mirror") {
		t.Errorf("fetch args %q lack the pull secrets", args)
	}
	s3, err := For(modelServer(withPulls("s3://bucket/resnet")), fetched)
	if err != nil {
		t.Fatal(err)
	}
	if s3.Fetches[0].PullSecrets != nil || slices.Contains(s3.Fetches[0].Args, "--pull-secrets") {
		t.Errorf("an s3:// model's fetch mounts pull secrets: %+v", s3.Fetches[0])
	}

	// The generations these specs had before the Jobs mounted pull
	// secrets: an s3:// model's Job is unchanged and keeps its generation
	// (fetched again for nothing otherwise); an oci:// one's gains a
	// volume, so a Job made before would have to change in place.
	if g := generation(modelServer(withPulls("s3://bucket/resnet"))); g != "307b5c71" {
		t.Errorf("an s3:// model's fetch generation changed (%s): it would be fetched again for nothing", g)
	}
	if g := generation(modelServer(withPulls(oci))); g == "0fc85751" {
		t.Error("an oci:// model with pull secrets kept its fetch generation: its Job's pod template would change in place")
	}
}

// TestAnOCIModelsFetchReadsTheServiceAccountsPullSecrets: where the pod
// template names no pull secret, an oci:// model's fetch reads the
// service account's, as its pods get them, and a change of them is a new
// Job; the template's, where it names some, are the only ones read; other
// schemes read none and keep their generation.
func TestAnOCIModelsFetchReadsTheServiceAccountsPullSecrets(t *testing.T) {
	const oci = "oci://registry.example.com/models/resnet:v1"
	build := func(ms *servingv1alpha1.ModelServer, account []string) Fetch {
		t.Helper()
		spec, err := ValidateWith(ms, Account{PullSecrets: account})
		if err != nil {
			t.Fatal(err)
		}
		v, err := spec.Values(fetched)
		if err != nil {
			t.Fatal(err)
		}
		return v.Fetches[0]
	}
	ociModel := modelServer(func(ms *servingv1alpha1.ModelServer) { ms.Spec.Model.StorageURI = oci })
	none, mirror, both := build(ociModel, nil), build(ociModel, []string{"mirror"}), build(ociModel, []string{"mirror", "regcred"})
	expectStrings(t, "the account's pull secrets", mirror.PullSecrets, []string{"mirror"})
	if none.Generation == mirror.Generation || mirror.Generation == both.Generation {
		t.Errorf("generations %s, %s, %s: the account's pull secrets changed no Job", none.Generation, mirror.Generation, both.Generation)
	}
	own := modelServer(func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Model.StorageURI = oci
		ms.Spec.PodTemplate.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
	})
	if f := build(own, []string{"mirror"}); !slices.Equal(f.PullSecrets, []string{"regcred"}) || f.Generation != build(own, nil).Generation {
		t.Errorf("with the template's pull secrets the fetch reads %q (generation %s): the account's count", f.PullSecrets, f.Generation)
	}
	s3 := modelServer()
	if f := build(s3, []string{"mirror"}); f.PullSecrets != nil || f.Generation != build(s3, nil).Generation {
		t.Errorf("an s3:// model's fetch reads the account's pull secrets: %+v", f)
	}
}

// TestASignatureKeyReachesTheFetchAndBadOnesAreNamed: the keys of
// spec.model.signature are the fetch's, and a new Job's; a key that does
// not read, or a signature of a model not in a registry, is named.
func TestASignatureKeyReachesTheFetchAndBadOnesAreNamed(t *testing.T) {
	key := sigtest.NewKey(t).PublicPEM()
	signed := func(uri string, keys ...string) *servingv1alpha1.ModelServer {
		return modelServer(func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.StorageURI = uri
			ms.Spec.Model.Signature = &servingv1alpha1.ModelSignature{PublicKeys: keys}
		})
	}
	const oci = "oci://registry.example.com/models/resnet:v1"
	v, err := For(signed(oci, key), fetched)
	if err != nil {
		t.Fatal(err)
	}
	if args := v.Fetches[0].Args; !slices.Contains(args, key) || args[slices.Index(args, key)-1] != "--signature-key" {
		t.Errorf("fetch args %q lack --signature-key and the key", args)
	}
	if generation(signed(oci, key)) == generation(modelServer(func(ms *servingv1alpha1.ModelServer) { ms.Spec.Model.StorageURI = oci })) {
		t.Error("requiring a signature kept the fetch generation: the model fetched unverified would stay")
	}
	for _, tc := range []struct {
		name, field string
		ms          *servingv1alpha1.ModelServer
	}{
		{"a key that is not PEM", "spec.model.signature.publicKeys[1]", signed(oci, key, "cosign.pub")},
		{"no key", "spec.model.signature.publicKeys", signed(oci)},
		{"a model not in a registry", "spec.model.signature", signed("s3://bucket/resnet", key)},
		{"a signature repository with a tag", "spec.model.signature.repository", func() *servingv1alpha1.ModelServer {
			ms := signed(oci, key)
			ms.Spec.Model.Signature.Repository = "registry.example.com/signatures:v1"
			return ms
		}()},
	} {
		_, err := For(tc.ms, fetched)
		var ve *Error
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: %v, want an error of %s", tc.name, err, tc.field)
		}
	}
}

func expect[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func expectStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

// TestAJobMadeBeforeTheFetchPrunedRendersAsItRuns: a fetch Job made
// before fetches pruned the volume keeps its pod template (immutable),
// without the model config; a new generation's Job reads it; a pvc://
// model's, on the user's claim, never does.
func TestAJobMadeBeforeTheFetchPrunedRendersAsItRuns(t *testing.T) {
	ms := modelServer()
	in := Inputs{ChartVersion: "0.1.0", AppVersion: "2.19.1", FetchImage: "example.com/op:2"}
	fresh, err := For(ms, in)
	if err != nil {
		t.Fatal(err)
	}
	if f := fresh.Fetches[0]; !f.ReadsModelConfig || !slices.Contains(f.Args, ServedConfigFlag) {
		t.Errorf("a new Job does not read the model config: %+v", f)
	}
	in.LiveJobs = map[string]LiveJob{fresh.Fetches[0].Generation: {Program: Program{Image: "example.com/op:1", Command: []string{fetchcontract.FetcherCommand}}}}
	live, err := For(ms, in)
	if err != nil {
		t.Fatal(err)
	}
	if f := live.Fetches[0]; f.ReadsModelConfig || slices.Contains(f.Args, ServedConfigFlag) {
		t.Errorf("a Job made without the model config renders with it: %+v", f)
	}
	pvc, err := For(modelServer(func(ms *servingv1alpha1.ModelServer) { ms.Spec.Model.StorageURI = "pvc://models/resnet" }), Inputs{FetchImage: "example.com/op:2"})
	if err != nil {
		t.Fatal(err)
	}
	if f := pvc.Fetches[0]; f.ReadsModelConfig || slices.Contains(f.Args, ServedConfigFlag) {
		t.Errorf("a pvc:// model's Job would prune the user's claim: %+v", f)
	}
}

// TestFirstFetchEndingChangesNoValue: a new ModelServer's release is
// installed once. The fetch ending must leave the values, and so the
// digest, as they were, or it would cost a Helm upgrade.
func TestFirstFetchEndingChangesNoValue(t *testing.T) {
	ms := modelServer()
	in := Inputs{ChartVersion: "0.1.0", AppVersion: "2.19.1", FetchImage: "example.com/op:1"}
	during, err := For(ms, in)
	if err != nil {
		t.Fatal(err)
	}
	in.Served = map[string]string{"resnet": during.Fetches[0].Generation}
	after, err := For(ms, in)
	if err != nil {
		t.Fatal(err)
	}
	if d1, d2 := Digest("0.1.0", during), Digest("0.1.0", after); d1 != d2 {
		t.Errorf("digest %s while fetching, %s once fetched: the fetch would cost an upgrade", d1, d2)
	}
}

// TestAnOperatorUpgradeChangesNothingThatRuns: a new operator image (the
// fetch image) must not fetch a model again, change a Job's immutable
// pod template, or restart serving pods. What runs keeps its image and
// command, also when it was made before the image had the fetcher and runs
// its entrypoint; only what is new takes the new image's fetcher.
func TestAnOperatorUpgradeChangesNothingThatRuns(t *testing.T) {
	ms := modelServer()
	old := Inputs{ChartVersion: "0.1.0", AppVersion: "2.19.1", FetchImage: "example.com/op:1"}
	before, err := For(ms, old)
	if err != nil {
		t.Fatal(err)
	}
	if before.Serving.ModelWait == nil {
		t.Fatal("no wait-for-model container to keep")
	}
	fetcher := []string{fetchcontract.FetcherCommand}
	expectStrings(t, "a new Job's command", before.Fetches[0].Command, fetcher)
	expectStrings(t, "new pods' wait command", before.Serving.ModelWait.Command, fetcher)

	for name, command := range map[string][]string{"the fetcher": fetcher, "the image's entrypoint": nil} {
		t.Run("from an image whose pods run "+name, func(t *testing.T) {
			upgraded := old
			upgraded.FetchImage = "example.com/op:2"
			upgraded.LiveJobs = map[string]LiveJob{before.Fetches[0].Generation: {
				Program: Program{Image: "example.com/op:1", Command: command}, NodeSelector: before.Fetches[0].NodeSelector,
				ReadsModelConfig: before.Fetches[0].ReadsModelConfig,
				Settings:         FetchSettings{ActiveDeadline: 3600, Resources: fetchResources()}, Finished: true,
			}}
			upgraded.LiveServingPod = &corev1.PodSpec{InitContainers: []corev1.Container{
				{Name: ModelWaitContainerName, Image: "example.com/op:1", Command: command, Args: before.Serving.ModelWait.Args},
			}}
			after, err := For(ms, upgraded)
			if err != nil {
				t.Fatal(err)
			}
			expect(t, "fetch generation", after.Fetches[0].Generation, before.Fetches[0].Generation)
			expect(t, "the existing Job's image", after.Fetches[0].Image, "example.com/op:1")
			expectStrings(t, "the existing Job's command", after.Fetches[0].Command, command)
			expect(t, "the running wait-for-model image", after.Serving.ModelWait.Image, "example.com/op:1")
			expectStrings(t, "the running wait-for-model command", after.Serving.ModelWait.Command, command)
			if command != nil && Digest("0.1.0", before) != Digest("0.1.0", after) {
				t.Error("the operator's new image alone changed the digest: every ModelServer would be upgraded")
			}
			// Values without a command are what operators before the
			// fetcher rendered, and so digested.
			if raw, err := json.Marshal(after); err != nil || (command == nil && strings.Contains(string(raw), `"command"`)) {
				t.Errorf("values with no command to keep still name one (%v): %s", err, raw)
			}

			// A new model is a new Job and new pods: those take the new
			// image's fetcher.
			changed := modelServer(func(ms *servingv1alpha1.ModelServer) { ms.Spec.Model.StorageURI = "s3://other" })
			fresh, err := For(changed, upgraded)
			if err != nil {
				t.Fatal(err)
			}
			expect(t, "a new generation's Job image", fresh.Fetches[0].Image, "example.com/op:2")
			expectStrings(t, "a new generation's Job command", fresh.Fetches[0].Command, fetcher)
			upgraded.LiveServingPod.InitContainers[0].Args = []string{"wait-for-model", "--file", "/models/other"}
			if fresh, err = For(ms, upgraded); err != nil {
				t.Fatal(err)
			}
			expect(t, "the wait image of pods that roll anyway", fresh.Serving.ModelWait.Image, "example.com/op:2")
			expectStrings(t, "the wait command of pods that roll anyway", fresh.Serving.ModelWait.Command, fetcher)
		})
	}
}

// TestTheServiceAccountIsReadOnlyForAnOCIModelWithoutPullSecrets: the
// account read is the template's, or the namespace's default.
func TestTheServiceAccountIsReadOnlyForAnOCIModelWithoutPullSecrets(t *testing.T) {
	ms := modelServer()
	if _, ok := NeedsServiceAccount(ms); ok {
		t.Error("an s3:// model's fetch reads the service account")
	}
	ms.Spec.Models = []servingv1alpha1.ModelSpec{{Name: "b", StorageURI: "oci://r.example/m:v1"}}
	if name, ok := NeedsServiceAccount(ms); !ok || name != "default" {
		t.Errorf("an oci:// model reads account %q (%v), want default", name, ok)
	}
	ms.Spec.PodTemplate.ServiceAccountName = "puller"
	if name, _ := NeedsServiceAccount(ms); name != "puller" {
		t.Errorf("reads account %q, want the template's", name)
	}
	ms.Spec.PodTemplate.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
	if _, ok := NeedsServiceAccount(ms); ok {
		t.Error("with the template's pull secrets, the account is still read")
	}
}

// TestARoleToAssumeIsTheFetchsAndAnInputOfIt: spec.model.webIdentity
// reaches the fetch's arguments, and a new role or audience a new Job;
// a role for a model not in S3, or not a role's ARN, is named.
func TestARoleToAssumeIsTheFetchsAndAnInputOfIt(t *testing.T) {
	const role = "arn:aws:iam::123456789012:role/model-reader"
	assuming := func(uri, arn, audience string) *servingv1alpha1.ModelServer {
		return modelServer(func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.StorageURI = uri
			ms.Spec.Model.WebIdentity = &servingv1alpha1.WebIdentity{RoleARN: arn, Audience: audience}
		})
	}
	v, err := For(assuming("s3://models/resnet", role, ""), fetched)
	if err != nil {
		t.Fatal(err)
	}
	f := v.Fetches[0]
	if i := slices.Index(f.Args, "--web-identity-role-arn"); i < 0 || f.Args[i+1] != role || f.WebIdentityAudience != DefaultWebIdentityAudience {
		t.Errorf("fetch args %q, audience %q; want the role, and %s", f.Args, f.WebIdentityAudience, DefaultWebIdentityAudience)
	}
	gens := map[string]bool{}
	for _, ms := range []*servingv1alpha1.ModelServer{
		modelServer(func(ms *servingv1alpha1.ModelServer) { ms.Spec.Model.StorageURI = "s3://models/resnet" }),
		assuming("s3://models/resnet", role, ""),
		assuming("s3://models/resnet", role+"-2", ""),
		assuming("s3://models/resnet", role, "minio"),
	} {
		gens[generation(ms)] = true
	}
	if len(gens) != 4 {
		t.Errorf("%d fetch generations for no role, a role, another role and another audience; want 4", len(gens))
	}
	if generation(assuming("s3://models/resnet", role, "")) != generation(assuming("s3://models/resnet", role, DefaultWebIdentityAudience)) {
		t.Error("the default audience, named, changed the fetch generation")
	}
	for _, tc := range []struct {
		name, field string
		ms          *servingv1alpha1.ModelServer
	}{
		{"a model not in S3", "spec.model.webIdentity", assuming("gs://models/resnet", role, "")},
		{"a user's ARN", "spec.model.webIdentity.roleArn", assuming("s3://models/resnet", "arn:aws:iam::123456789012:user/ci", "")},
	} {
		_, err := For(tc.ms, fetched)
		var ve *Error
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: %v, want an error of %s", tc.name, err, tc.field)
		}
	}
}

// TestARoleNotNamedIsTheServiceAccountsAnnotated: webIdentity: {} takes
// the role and audience the pods' service account is annotated with, as
// eksctl annotates one; a role in the spec wins; a new annotated role is
// a new Job; no role anywhere is named, with the account.
func TestARoleNotNamedIsTheServiceAccountsAnnotated(t *testing.T) {
	const annotated = "arn:aws:iam::123456789012:role/annotated"
	ms := modelServer(func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Model.WebIdentity = &servingv1alpha1.WebIdentity{}
		ms.Spec.PodTemplate.ServiceAccountName = "model-reader"
	})
	if name, ok := NeedsServiceAccount(ms); !ok || name != "model-reader" {
		t.Errorf("NeedsServiceAccount = %q, %v; want model-reader read for its role", name, ok)
	}
	role := func(f Fetch) string { return f.Args[slices.Index(f.Args, "--web-identity-role-arn")+1] }
	f, gen := fetchWith(t, ms, Account{RoleARN: annotated, Audience: "sts.example.com"})
	if role(f) != annotated || f.WebIdentityAudience != "sts.example.com" {
		t.Errorf("role %s for %s; want the annotated role and audience", role(f), f.WebIdentityAudience)
	}
	if _, other := fetchWith(t, ms, Account{RoleARN: annotated + "-2"}); other == gen {
		t.Error("another annotated role kept the fetch generation")
	}
	named := ms.DeepCopy()
	named.Spec.Model.WebIdentity = &servingv1alpha1.WebIdentity{RoleARN: "arn:aws:iam::123456789012:role/named", Audience: "sts.amazonaws.com"}
	if f, _ := fetchWith(t, named, Account{RoleARN: annotated, Audience: "sts.example.com"}); role(f) != "arn:aws:iam::123456789012:role/named" || f.WebIdentityAudience != "sts.amazonaws.com" {
		t.Errorf("role %s for %s; want the spec's", role(f), f.WebIdentityAudience)
	}
	if _, ok := NeedsServiceAccount(named); ok {
		t.Error("a role named in the spec still reads the service account")
	}
	_, err := ValidateWith(ms, Account{})
	var ve *Error
	if !errors.As(err, &ve) || ve.Field != "spec.model.webIdentity.roleArn" || !strings.Contains(ve.Reason, `service account "model-reader" has no eks.amazonaws.com/role-arn annotation`) {
		t.Errorf("no role anywhere: %v", err)
	}
}

// TestAGCSModelFederatesThroughItsProvider: a gs:// webIdentity names a
// Workload Identity Federation provider, whose own name is the token's
// audience unless another is given, and a service account to impersonate
// if any; each is an input of the fetch; without a provider, or with a
// role, it is refused.
func TestAGCSModelFederatesThroughItsProvider(t *testing.T) {
	const provider = "projects/123456789012/locations/global/workloadIdentityPools/clusters/providers/ml-cluster"
	federated := func(w servingv1alpha1.WebIdentity) *servingv1alpha1.ModelServer {
		return modelServer(func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.StorageURI = "gs://models/resnet"
			ms.Spec.Model.WebIdentity = &w
		})
	}
	v, err := For(federated(servingv1alpha1.WebIdentity{Provider: provider, ServiceAccount: "reader@ml.iam.gserviceaccount.com"}), fetched)
	if err != nil {
		t.Fatal(err)
	}
	f := v.Fetches[0]
	if argOf(f, "--web-identity-provider") != provider || argOf(f, "--web-identity-service-account") != "reader@ml.iam.gserviceaccount.com" ||
		argOf(f, "--web-identity-token-file") != WebIdentityTokenPath || argOf(f, "--web-identity-role-arn") != "" || f.WebIdentityAudience != "https://iam.googleapis.com/"+provider {
		t.Errorf("fetch args %q, audience %q; want the provider, the service account and the provider's audience", f.Args, f.WebIdentityAudience)
	}
	if _, ok := NeedsServiceAccount(federated(servingv1alpha1.WebIdentity{Provider: provider})); ok {
		t.Error("a federated gs:// model reads the service account for a role")
	}
	gens := map[string]bool{}
	for _, w := range []servingv1alpha1.WebIdentity{
		{Provider: provider}, {Provider: provider, ServiceAccount: "reader@ml.iam.gserviceaccount.com"},
		{Provider: provider + "-2"}, {Provider: provider, Audience: "ml-cluster"},
	} {
		gens[generation(federated(w))] = true
	}
	if len(gens) != 4 {
		t.Errorf("%d fetch generations for four federations; want 4", len(gens))
	}
	for _, tc := range []struct {
		name, field string
		w           servingv1alpha1.WebIdentity
	}{
		{"no provider", "spec.model.webIdentity.provider", servingv1alpha1.WebIdentity{}},
		{"a role", "spec.model.webIdentity", servingv1alpha1.WebIdentity{Provider: provider, RoleARN: "arn:aws:iam::123456789012:role/r"}},
	} {
		_, err := For(federated(tc.w), fetched)
		var ve *Error
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: %v, want an error of %s", tc.name, err, tc.field)
		}
	}
	s3 := modelServer(func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Model.WebIdentity = &servingv1alpha1.WebIdentity{RoleARN: "arn:aws:iam::123456789012:role/r", Provider: provider}
	})
	var ve *Error
	if _, err := For(s3, fetched); !errors.As(err, &ve) || ve.Field != "spec.model.webIdentity" {
		t.Errorf("an s3:// model with a provider: %v", err)
	}
	// The account's role taken keeps the provider, which is refused.
	s3.Spec.Model.WebIdentity.RoleARN = ""
	if _, err := ValidateWith(s3, Account{RoleARN: "arn:aws:iam::123456789012:role/annotated"}); !errors.As(err, &ve) || ve.Field != "spec.model.webIdentity" {
		t.Errorf("an s3:// model with a provider and the account's role: %v", err)
	}
}

// TestAnAzureModelSignsInAsAnEntraApplication: an Azure webIdentity names
// an application and its tenant, or takes those the service account is
// annotated with (Microsoft Entra Workload ID's annotations), each an
// input of the fetch, with Entra's token exchange audience; without an
// application or a tenant anywhere, or with another cloud's identity, it
// is refused.
func TestAnAzureModelSignsInAsAnEntraApplication(t *testing.T) {
	const (
		uri    = "https://models.blob.core.windows.net/team/resnet"
		client = "00000000-1111-2222-3333-444444444444"
		tenant = "contoso.onmicrosoft.com"
	)
	signingIn := func(w servingv1alpha1.WebIdentity) *servingv1alpha1.ModelServer {
		return modelServer(func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.StorageURI = uri
			ms.Spec.Model.WebIdentity = &w
			ms.Spec.PodTemplate.ServiceAccountName = "model-reader"
		})
	}
	named := signingIn(servingv1alpha1.WebIdentity{ClientID: client, TenantID: tenant})
	f, gen := fetchWith(t, named, Account{})
	if argOf(f, "--web-identity-client-id") != client || argOf(f, "--web-identity-tenant-id") != tenant || argOf(f, "--web-identity-token-file") != WebIdentityTokenPath ||
		argOf(f, "--web-identity-role-arn") != "" || f.WebIdentityAudience != DefaultEntraAudience {
		t.Errorf("fetch args %q, audience %q; want the application, its tenant and %s", f.Args, f.WebIdentityAudience, DefaultEntraAudience)
	}
	if _, ok := NeedsServiceAccount(named); ok {
		t.Error("an application named in the spec still reads the service account")
	}

	annotated := signingIn(servingv1alpha1.WebIdentity{})
	if name, ok := NeedsServiceAccount(annotated); !ok || name != "model-reader" {
		t.Errorf("NeedsServiceAccount = %q, %v; want model-reader read for its application", name, ok)
	}
	f, taken := fetchWith(t, annotated, Account{ClientID: client, TenantID: tenant, RoleARN: "arn:aws:iam::123456789012:role/r"})
	if argOf(f, "--web-identity-client-id") != client || argOf(f, "--web-identity-tenant-id") != tenant || argOf(f, "--web-identity-role-arn") != "" || taken != gen {
		t.Errorf("fetch args %q; want the annotated application, and the fetch generation of the same one named", f.Args)
	}
	if _, other := fetchWith(t, annotated, Account{ClientID: "00000000-1111-2222-3333-555555555555", TenantID: tenant}); other == gen {
		t.Error("another annotated application kept the fetch generation")
	}
	if _, other := fetchWith(t, signingIn(servingv1alpha1.WebIdentity{ClientID: client, TenantID: tenant, Audience: "api://other"}), Account{}); other == gen {
		t.Error("another audience kept the fetch generation")
	}
	// The spec's tenant with the account's application.
	if f, _ := fetchWith(t, signingIn(servingv1alpha1.WebIdentity{TenantID: "fabrikam.example"}), Account{ClientID: client, TenantID: tenant}); argOf(f, "--web-identity-tenant-id") != "fabrikam.example" {
		t.Errorf("fetch args %q; want the spec's tenant", f.Args)
	}

	for _, tc := range []struct {
		name, field, reason string
		w                   servingv1alpha1.WebIdentity
		account             Account
	}{
		{"no application", "spec.model.webIdentity.clientId", `service account "model-reader" has no azure.workload.identity/client-id annotation`, servingv1alpha1.WebIdentity{}, Account{TenantID: tenant}},
		{"no tenant", "spec.model.webIdentity.tenantId", `service account "model-reader" has no azure.workload.identity/tenant-id annotation`, servingv1alpha1.WebIdentity{ClientID: client}, Account{}},
		{"not a client ID", "spec.model.webIdentity.clientId", "is not an application's client ID", servingv1alpha1.WebIdentity{ClientID: "reader", TenantID: tenant}, Account{}},
		{"a role", "spec.model.webIdentity", "names a Microsoft Entra application", servingv1alpha1.WebIdentity{ClientID: client, TenantID: tenant, RoleARN: "arn:aws:iam::123456789012:role/r"}, Account{}},
	} {
		_, err := ValidateWith(signingIn(tc.w), tc.account)
		var ve *Error
		if !errors.As(err, &ve) || ve.Field != tc.field || !strings.Contains(ve.Reason, tc.reason) {
			t.Errorf("%s: %v, want an error of %s saying %q", tc.name, err, tc.field, tc.reason)
		}
	}
	s3 := modelServer(func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Model.WebIdentity = &servingv1alpha1.WebIdentity{RoleARN: "arn:aws:iam::123456789012:role/r", ClientID: client}
	})
	if _, err := For(s3, fetched); err == nil {
		t.Error("an s3:// model with an Entra application was accepted")
	}
}

// fetchWith is the first fetch of ms for pods whose service account gives
// account, and its model's fetch generation.
func fetchWith(t *testing.T, ms *servingv1alpha1.ModelServer, account Account) (Fetch, string) {
	t.Helper()
	spec, err := ValidateWith(ms, account)
	if err != nil {
		t.Fatal(err)
	}
	v, err := spec.Values(fetched)
	if err != nil {
		t.Fatal(err)
	}
	return v.Fetches[0], spec.Models[0].Generation
}

// argOf is the value of a fetch's flag, "" when it has none.
func argOf(f Fetch, flag string) string {
	if i := slices.Index(f.Args, flag); i >= 0 {
		return f.Args[i+1]
	}
	return ""
}

// TestAnEKSPodIdentityAssociationNeedsNoRoleOrAnnotation: eksPodIdentity
// fetches with a token for the agent's audience, and reads nothing of the
// service account; a role or an audience beside it is refused, and so is
// it for a model not in S3.
func TestAnEKSPodIdentityAssociationNeedsNoRoleOrAnnotation(t *testing.T) {
	associated := func(uri string, w servingv1alpha1.WebIdentity) *servingv1alpha1.ModelServer {
		return modelServer(func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.StorageURI = uri
			ms.Spec.Model.WebIdentity = &w
		})
	}
	ms := associated("s3://models/resnet", servingv1alpha1.WebIdentity{EKSPodIdentity: true})
	if _, ok := NeedsServiceAccount(ms); ok {
		t.Error("a pod identity association reads the service account")
	}
	f, gen := fetchWith(t, ms, Account{RoleARN: "arn:aws:iam::123456789012:role/annotated"})
	if !slices.Contains(f.Args, "--eks-pod-identity") || argOf(f, "--web-identity-token-file") != WebIdentityTokenPath ||
		argOf(f, "--web-identity-role-arn") != "" || f.WebIdentityAudience != EKSPodIdentityAudience {
		t.Errorf("fetch args %q, audience %q; want the agent's, and no role", f.Args, f.WebIdentityAudience)
	}
	if _, other := fetchWith(t, associated("s3://models/resnet", servingv1alpha1.WebIdentity{RoleARN: "arn:aws:iam::123456789012:role/r"}), Account{}); other == gen {
		t.Error("a pod identity association and a role have one fetch generation")
	}
	for _, tc := range []struct {
		name, field string
		ms          *servingv1alpha1.ModelServer
	}{
		{"a role beside it", "spec.model.webIdentity.eksPodIdentity", associated("s3://models/resnet", servingv1alpha1.WebIdentity{EKSPodIdentity: true, RoleARN: "arn:aws:iam::123456789012:role/r"})},
		{"an audience beside it", "spec.model.webIdentity.eksPodIdentity", associated("s3://models/resnet", servingv1alpha1.WebIdentity{EKSPodIdentity: true, Audience: "sts.amazonaws.com"})},
		{"a gs:// model", "spec.model.webIdentity", associated("gs://models/resnet", servingv1alpha1.WebIdentity{EKSPodIdentity: true, Provider: "projects/1/locations/global/workloadIdentityPools/p/providers/q"})},
	} {
		_, err := For(tc.ms, fetched)
		var ve *Error
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: %v, want an error of %s", tc.name, err, tc.field)
		}
	}
}

// TestGKEsMetadataServerNeedsNoTokenButTheAnnotation: gkeWorkloadIdentity
// fetches with no projected token, expecting the Google service account
// the pods' service account is annotated with (read, as it names it); a
// new annotation is a new fetch; a provider or audience beside it, an
// annotation that is no Google service account, and a model not in
// Cloud Storage are refused.
func TestGKEsMetadataServerNeedsNoTokenButTheAnnotation(t *testing.T) {
	gke := func(uri string, w servingv1alpha1.WebIdentity) *servingv1alpha1.ModelServer {
		return modelServer(func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.StorageURI = uri
			w.GKEWorkloadIdentity = true
			ms.Spec.Model.WebIdentity = &w
		})
	}
	ms := gke("gs://models/resnet", servingv1alpha1.WebIdentity{})
	if name, ok := NeedsServiceAccount(ms); !ok || name != "default" {
		t.Errorf("NeedsServiceAccount = %q, %v; want the pods' account read", name, ok)
	}
	const gsa = "reader@ml.iam.gserviceaccount.com"
	f, annotated := fetchWith(t, ms, Account{GoogleServiceAccount: gsa})
	if !slices.Contains(f.Args, "--gke-workload-identity") || argOf(f, "--web-identity-service-account") != gsa ||
		argOf(f, "--web-identity-token-file") != "" || f.WebIdentityAudience != "" {
		t.Errorf("fetch args %q, audience %q; want the metadata server expected as %s, and no token", f.Args, f.WebIdentityAudience, gsa)
	}
	f, unannotated := fetchWith(t, ms, Account{})
	if slices.Contains(f.Args, "--web-identity-service-account") {
		t.Errorf("fetch args %q; want no service account expected", f.Args)
	}
	if annotated == unannotated {
		t.Error("a service account annotated with a Google service account, and not, have one fetch generation")
	}
	// A model in Artifact Registry, the same way.
	f, _ = fetchWith(t, gke("oci://europe-west4-docker.pkg.dev/ml/models/resnet:v1", servingv1alpha1.WebIdentity{}), Account{GoogleServiceAccount: gsa})
	if !slices.Contains(f.Args, "--gke-workload-identity") || argOf(f, "--web-identity-service-account") != gsa {
		t.Errorf("fetch args %q of a model in Artifact Registry; want the metadata server expected as %s", f.Args, gsa)
	}
	if _, err := ValidateWith(ms, Account{GoogleServiceAccount: "reader"}); err == nil || !strings.Contains(err.Error(), `annotated iam.gke.io/gcp-service-account: "reader"`) {
		t.Errorf("an annotation of no Google service account: %v", err)
	}
	for _, tc := range []struct {
		name, field string
		ms          *servingv1alpha1.ModelServer
	}{
		{"a provider beside it", "spec.model.webIdentity.gkeWorkloadIdentity", gke("gs://models/resnet", servingv1alpha1.WebIdentity{Provider: "projects/1/locations/global/workloadIdentityPools/p/providers/q"})},
		{"an audience beside it", "spec.model.webIdentity.gkeWorkloadIdentity", gke("gs://models/resnet", servingv1alpha1.WebIdentity{Audience: "a"})},
		{"an s3:// model", "spec.model.webIdentity", gke("s3://models/resnet", servingv1alpha1.WebIdentity{RoleARN: "arn:aws:iam::123456789012:role/r"})},
		{"an Azure model", "spec.model.webIdentity", gke("https://acct.blob.core.windows.net/models/m", servingv1alpha1.WebIdentity{})},
		{"an oci:// model in Docker Hub", "spec.model.webIdentity.gkeWorkloadIdentity", gke("oci://docker.io/ml/resnet:v1", servingv1alpha1.WebIdentity{})},
		{"an oci:// model with a role beside it", "spec.model.webIdentity", gke("oci://us-docker.pkg.dev/ml/models/resnet:v1", servingv1alpha1.WebIdentity{RoleARN: "arn:aws:iam::123456789012:role/r"})},
	} {
		_, err := For(tc.ms, fetched)
		var ve *Error
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: %v, want an error of %s", tc.name, err, tc.field)
		}
	}
}
