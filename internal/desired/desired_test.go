package desired

import (
	"errors"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/status"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

var cfg = Config{ChartVersion: "0.1.0", AppVersion: "2.19.1", Chart: "0.1.0+0123456789abcdef", FetchImage: "example.com/op:2"}

func modelServer() *servingv1alpha1.ModelServer {
	return &servingv1alpha1.ModelServer{
		ObjectMeta: metav1.ObjectMeta{Name: "resnet", Namespace: "ml", UID: "uid-1"},
		Spec: servingv1alpha1.ModelServerSpec{
			Model:    &servingv1alpha1.ModelSpec{StorageURI: "s3://models/resnet"},
			Replicas: ptr.To[int32](2),
		},
	}
}

// job is a fetch Job of the given outcome, run by an image, made with
// the default fetch settings.
func job(name, image string, outcome batchv1.JobConditionType) *batchv1.Job {
	spec, err := values.Validate(modelServer())
	if err != nil {
		panic(err)
	}
	settings := spec.FetchSettings()
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name}}
	j.Spec.ActiveDeadlineSeconds = ptr.To(settings.ActiveDeadline)
	j.Spec.Template.Spec.Containers = []corev1.Container{{Name: values.FetchContainerName, Image: image, Resources: settings.Resources}}
	if outcome != "" {
		j.Status.Conditions = []batchv1.JobCondition{{Type: outcome, Status: corev1.ConditionTrue}}
	}
	return j
}

func TestANewModelServerIsServedFromTheGenerationBeingFetched(t *testing.T) {
	ms := modelServer()
	st, err := For(ms, Observed{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := st.Spec.Models[0]
	if st.Fetches[0].State != status.FetchMissing || st.Fetches[0].FetchJob != m.FetchJob {
		t.Errorf("fetch %+v, want Missing for Job %s", st.Fetches[0], m.FetchJob)
	}
	if got := st.Values.Models[0].BasePath; got != "/models/"+m.Generation {
		t.Errorf("base path %q, want the generation being fetched", got)
	}
	if st.Values.Fetches[0].Image != cfg.FetchImage {
		t.Errorf("fetch image %q, want %q", st.Values.Fetches[0].Image, cfg.FetchImage)
	}
	if st.Endpoints.REST != "http://resnet.ml.svc:8501/v1/models/resnet" || st.Fetches[0].Status.Endpoint != st.Endpoints.REST {
		t.Errorf("endpoints %+v, model's %q", st.Endpoints, st.Fetches[0].Status.Endpoint)
	}
	if st.Spec.DesiredReplicas != 2 || st.Selector == "" || len(st.Digest) != 40 {
		t.Errorf("desired replicas %d, selector %q, digest %q", st.Spec.DesiredReplicas, st.Selector, st.Digest)
	}
}

// TestAFetchJobIsRenderedAsItWasMade: whether a live Job's fetch reads
// the model config is read from its arguments, so that a Job made before
// fetches pruned the volume keeps its immutable pod template.
func TestAFetchJobIsRenderedAsItWasMade(t *testing.T) {
	ms := modelServer()
	fresh, err := For(ms, Observed{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	name := fresh.Spec.Models[0].FetchJob
	for _, reads := range []bool{false, true} {
		j := job(name, "example.com/op:1", "")
		if reads {
			j.Spec.Template.Spec.Containers[0].Args = fresh.Values.Fetches[0].Args
		}
		st, err := For(ms, Observed{FetchJobs: map[string]*status.FetchJob{name: {Job: j}}}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Values.Fetches[0].ReadsModelConfig; got != reads {
			t.Errorf("a Job made with args %q renders as reading the model config: %v", j.Spec.Template.Spec.Containers[0].Args, got)
		}
	}
}

func TestAFinishedFetchIsReadFromItsTerminationMessage(t *testing.T) {
	ms := modelServer()
	fresh, err := For(ms, Observed{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	name := fresh.Spec.Models[0].FetchJob
	// The Job was made by the operator's previous image, and runs.
	first, err := For(ms, Observed{FetchJobs: map[string]*status.FetchJob{name: {Job: job(name, "example.com/op:1", "")}}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	obs := Observed{FetchJobs: map[string]*status.FetchJob{name: {
		Job:         job(name, "example.com/op:1", batchv1.JobComplete),
		Termination: `{"versions":[1,2],"files":4,"bytes":2048,"digest":"sha256:ab"}`,
	}}}
	st, err := For(ms, obs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := st.Fetches[0]
	if f.State != status.FetchSucceeded || !f.NewlyFetched || f.Status.Digest != "sha256:ab" || !slices.Equal(f.Status.ServedVersions, []int64{2}) {
		t.Errorf("fetch %+v", f)
	}
	// The Job keeps the image it runs: its pod template cannot change.
	if st.Values.Fetches[0].Image != "example.com/op:1" {
		t.Errorf("fetch image %q, want the Job's", st.Values.Fetches[0].Image)
	}
	// The fetch ending changes no value: it costs no upgrade.
	if st.Digest != first.Digest {
		t.Error("the digest changed when the first fetch ended")
	}

	// Once the status holds it, the fetch is no news and its summary stays
	// without the termination message being read again.
	obs.Status.Model = &f.Status
	obs.FetchJobs[name].Termination = ""
	again, err := For(ms, obs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if g := again.Fetches[0]; g.NewlyFetched || g.Status.Digest != "sha256:ab" {
		t.Errorf("fetch seen again %+v", g)
	}
}

func TestAFailedFetchScalesAFreshModelServerToZero(t *testing.T) {
	ms := modelServer()
	first, _ := For(ms, Observed{}, cfg)
	name := first.Spec.Models[0].FetchJob
	st, err := For(ms, Observed{FetchJobs: map[string]*status.FetchJob{name: {
		Job: job(name, cfg.FetchImage, batchv1.JobFailed), Termination: "NotFound: s3://models/resnet: no objects",
	}}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if f := st.Fetches[0]; f.State != status.FetchFailed || f.Reason != servingv1alpha1.ReasonNotFound {
		t.Errorf("fetch %+v, want Failed with NotFound", f)
	}
	if st.Values.Serving.Replicas != 0 {
		t.Errorf("replicas %d, want 0 while nothing can be served", st.Values.Serving.Replicas)
	}
}

func TestAnInvalidSpecIsRefusedBeforeAnythingIsBuilt(t *testing.T) {
	for uri, field := range map[string]string{
		"https://x/y#sha256=zz": "spec.model.storageUri",
		"s3://m/a//b":           "spec.model.storageUri",
	} {
		ms := modelServer()
		ms.Spec.Model.StorageURI = uri
		st, err := For(ms, Observed{}, cfg)
		var verr *values.Error
		if !errors.As(err, &verr) || verr.Field != field || st != nil {
			t.Errorf("%s: state %v, error %v; want a *values.Error naming %s", uri, st, err, field)
		}
	}
}

func TestAnAutoscaledDeploymentKeepsItsCount(t *testing.T) {
	ms := modelServer()
	ms.Spec.Replicas = nil
	ms.Spec.Autoscaling = &servingv1alpha1.Autoscaling{MaxReplicas: 5, TargetCPUUtilizationPercentage: ptr.To[int32](70)}
	ms.Spec.Model.StorageURI = "pvc://models/resnet"
	d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](4)}}
	st, err := For(ms, Observed{Deployment: d}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if st.Values.Serving.Replicas != 4 {
		t.Errorf("replicas %d, want the autoscaler's 4", st.Values.Serving.Replicas)
	}
}
