package helmcharts_test

import (
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	helmcharts "github.com/modelserver-dev/modelserver-operator/helm-charts"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// FuzzSpecToManifests takes arbitrary strings and numbers through
// values.For and the chart. It must never panic. Either values.For refuses
// with a *values.Error, or the chart renders manifests that decode
// strictly into their API types and carry each input exactly where it
// belongs: no string can add a field, a document or an argument.
func FuzzSpecToManifests(f *testing.F) {
	f.Add("resnet", "resnet", "s3://models/resnet", "tensorflow/serving:2.19.1", int32(2), int32(8500), int32(8501), "team", "ml", "note", "x", "ENV_A", "v")
	f.Add("m", "x\"\n  base_path: /etc", "s3://m/r\n- --dest=/", "img\n  command: [sh]", int32(-1), int32(1), int32(1), "a b", "c/d", "k", "}}{{", "A=B", "$(x)")
	f.Add("p", "p", "pvc://claim/../../etc", "i:1", int32(1000), int32(65535), int32(1024), "", "", "", "", "", "")
	f.Add("u", "модель", "https://h/m.tgz?sig=abc", "i@sha256:00", int32(0), int32(0), int32(0), "k", "", "ann", "{{ .Values }}", "PATH", "/bin")
	f.Add("d", "---", "/models/---\n---\nkind: Secret", "---", int32(3), int32(9000), int32(9001), "x", "---", "y", "---\nkind: Pod", "E", "---")
	f.Fuzz(specToManifests)
}

// specToManifests is FuzzSpecToManifests's check of one input.
func specToManifests(t *testing.T, name, modelName, uri, image string, replicas, grpc, rest int32, labelKey, labelValue, annKey, annValue, envName, envValue string) {
	if len(name) > 253 {
		return // the apiserver refuses such names before anything sees them
	}
	ms := &servingv1alpha1.ModelServer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID("3f0c6a2e-0000-4000-8000-000000000001")},
		Spec: servingv1alpha1.ModelServerSpec{
			Model:    &servingv1alpha1.ModelSpec{Name: modelName, StorageURI: uri},
			Replicas: ptr.To(replicas),
			Image:    image,
			Ports:    servingv1alpha1.Ports{GRPC: grpc, REST: rest},
		},
	}
	if labelKey != "" {
		ms.Spec.PodTemplate.Labels = map[string]string{labelKey: labelValue}
	}
	if annKey != "" {
		ms.Spec.PodTemplate.Annotations = map[string]string{annKey: annValue}
	}
	if envName != "" {
		ms.Spec.PodTemplate.Env = []corev1.EnvVar{{Name: envName, Value: envValue}}
	}
	served := modelName
	if served == "" {
		served = name
	}
	v, err := values.For(ms, values.Inputs{ChartVersion: chartVersion, AppVersion: "2.19.1", FetchImage: fetchImage,
		Served: map[string]string{served: "g1"}})
	if err != nil {
		var ve *values.Error
		if !errors.As(err, &ve) {
			t.Fatalf("values.For: %v is not a *values.Error", err)
		}
		return
	}
	m, err := v.Map()
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := helmcharts.Render(m, name, namespace)
	if err != nil {
		// The values schema may refuse what values.For let through; that
		// is a refusal, not a broken manifest, but it must be an error
		// of the chart's values, not of the templates.
		t.Skipf("values refused by the chart: %v", err)
	}
	objs := decodeAll(t, rendered)
	cm := objs.configMap(t)
	for file, text := range v.ConfigFiles {
		if cm.Data[file] != text {
			t.Errorf("%s changed on its way through YAML:\n%q\n%q", file, cm.Data[file], text)
		}
	}
	d := objs.deployment(t)
	if got := d.Spec.Template.Spec.Containers[0].Image; got != v.Serving.Image {
		t.Errorf("serving image %q, want %q", got, v.Serving.Image)
	}
	if labelKey != "" && d.Spec.Template.Labels[labelKey] != labelValue {
		t.Errorf("pod label %q = %q, want %q", labelKey, d.Spec.Template.Labels[labelKey], labelValue)
	}
	if annKey != "" && d.Spec.Template.Annotations[annKey] != annValue {
		t.Errorf("pod annotation %q = %q, want %q", annKey, d.Spec.Template.Annotations[annKey], annValue)
	}
	job := objs.job(t)
	args := job.Spec.Template.Spec.Containers[0].Args
	if len(v.Fetches) != 1 || !slices.Equal(args, v.Fetches[0].Args) {
		t.Errorf("fetch args %q, want those of %+v", args, v.Fetches)
	}
	if i := slices.Index(args, "--uri"); i < 0 || i+1 >= len(args) || args[i+1] != uri {
		t.Errorf("fetch args %q do not pass the URI %q as one argument", args, uri)
	}
}
