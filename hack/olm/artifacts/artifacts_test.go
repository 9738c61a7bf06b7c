package artifacts

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

func widgetInputs(t *testing.T) Inputs {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return Inputs{CSVBase: read("csv-base.yaml"), Kustomized: read("kustomized.yaml"), Samples: [][]byte{read("sample.yaml")}, ServingImage: "example/server:1.2.3"}
}

func widgetParams(v string) Params {
	p := DefaultParams(v)
	p.Image = "example/widget-operator:" + v
	return p
}

func widgetCSV(t *testing.T, files Files) v1alpha1.ClusterServiceVersion {
	t.Helper()
	data, ok := files["bundle/manifests/widget-operator.clusterserviceversion.yaml"]
	if !ok {
		t.Fatalf("no CSV among %v", slices.Sorted(maps.Keys(files)))
	}
	var csv v1alpha1.ClusterServiceVersion
	if err := yaml.UnmarshalStrict(data, &csv); err != nil {
		t.Fatal(err)
	}
	return csv
}

func TestBundleSplitsTheRolesByScope(t *testing.T) {
	files, err := Bundle(widgetInputs(t), widgetParams("1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	spec := widgetCSV(t, files).Spec.InstallStrategy.StrategySpec
	wantNS := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"example.dev"}, Resources: []string{"widgets", "widgets/status"}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
	}
	wantCluster := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{NonResourceURLs: []string{"/healthz"}, Verbs: []string{"get"}},
	}
	if len(spec.Permissions) != 1 || spec.Permissions[0].ServiceAccountName != "widget-manager" || !reflect.DeepEqual(spec.Permissions[0].Rules, wantNS) {
		t.Errorf("permissions:\n got %+v\nwant %+v", spec.Permissions, wantNS)
	}
	if len(spec.ClusterPermissions) != 1 || !reflect.DeepEqual(spec.ClusterPermissions[0].Rules, wantCluster) {
		t.Errorf("clusterPermissions:\n got %+v\nwant %+v", spec.ClusterPermissions, wantCluster)
	}
}

func TestBundleSetsTheReleaseFields(t *testing.T) {
	p := widgetParams("1.2.0")
	p.Replaces = "widget-operator.v1.1.0"
	p.Channels = []string{"candidate", "fast"}
	files, err := Bundle(widgetInputs(t), p)
	if err != nil {
		t.Fatal(err)
	}
	csv := widgetCSV(t, files)
	if csv.Name != "widget-operator.v1.2.0" || csv.Spec.Version.String() != "1.2.0" || csv.Spec.Replaces != p.Replaces {
		t.Errorf("name %s version %s replaces %s", csv.Name, csv.Spec.Version, csv.Spec.Replaces)
	}
	if got := csv.Annotations["olm.skipRange"]; got != ">=0.0.0 <1.2.0" {
		t.Errorf("skipRange %q", got)
	}
	if csv.Annotations["containerImage"] != p.Image || csv.Annotations["capabilities"] != "Basic Install" {
		t.Errorf("annotations %v", csv.Annotations)
	}
	wantImages := []v1alpha1.RelatedImage{{Name: "operator", Image: p.Image}, {Name: "tensorflow-serving", Image: "example/server:1.2.3"}, {Name: "tensorflow-serving-gpu", Image: "example/server:1.2.3-gpu"}}
	if !reflect.DeepEqual(csv.Spec.RelatedImages, wantImages) {
		t.Errorf("relatedImages %+v, want %+v", csv.Spec.RelatedImages, wantImages)
	}
	if !strings.Contains(csv.Annotations["alm-examples"], `"name": "two"`) {
		t.Errorf("alm-examples %s lacks the second sample", csv.Annotations["alm-examples"])
	}

	d := csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs[0]
	if _, ok := d.Label["app.kubernetes.io/managed-by"]; ok {
		t.Errorf("deployment label %v keeps managed-by kustomize", d.Label)
	}
	pod := d.Spec.Template.Spec
	if pod.Containers[0].Image != "example/sidecar:1" {
		t.Errorf("the sidecar's image changed to %s", pod.Containers[0].Image)
	}
	m := pod.Containers[1]
	if m.Image != p.Image || len(m.Env) != 2 || m.Env[0].Value != p.Image || m.Env[1].Name != "WATCH_NAMESPACE" ||
		m.Env[1].ValueFrom.FieldRef.FieldPath != "metadata.annotations['olm.targetNamespaces']" {
		t.Errorf("manager container %+v", m)
	}
	if pod.Volumes[0].EmptyDir == nil {
		t.Errorf("emptyDir: {} was lost: %+v", pod.Volumes)
	}

	wantFiles := []string{
		"bundle.Dockerfile",
		"bundle/manifests/example.dev_widgets.yaml",
		"bundle/manifests/widget-metrics-reader_rbac.authorization.k8s.io_v1_clusterrole.yaml",
		"bundle/manifests/widget-metrics_v1_service.yaml",
		"bundle/manifests/widget-operator.clusterserviceversion.yaml",
		"bundle/metadata/annotations.yaml",
	}
	if got := slices.Sorted(maps.Keys(files)); !reflect.DeepEqual(got, wantFiles) {
		t.Errorf("files:\n got %v\nwant %v", got, wantFiles)
	}
	if bytes.Contains(files["bundle/manifests/widget-metrics_v1_service.yaml"], []byte("namespace")) {
		t.Errorf("the Service keeps its namespace")
	}
	for _, want := range []string{"channels.v1: candidate,fast", "channel.default.v1: candidate", "package.v1: widget-operator"} {
		if !bytes.Contains(files[AnnotationsFile], []byte(want)) {
			t.Errorf("annotations.yaml lacks %q:\n%s", want, files[AnnotationsFile])
		}
		if !bytes.Contains(files[BundleDockerfile], []byte(strings.Replace(want, ": ", "=", 1))) {
			t.Errorf("bundle.Dockerfile lacks %q:\n%s", want, files[BundleDockerfile])
		}
	}

	again, err := Bundle(widgetInputs(t), p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(files, again) {
		t.Error("two runs on the same inputs differ")
	}
}

func TestBundleRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"a wildcard", "verbs: [get, create, update]", `verbs: ["*"]`, "wildcard"},
		{"a resource of unknown scope", "resources: [configmaps, namespaces]", "resources: [configmaps, gizmos]", `scope of resource "gizmos"`},
		{"a lax security context", "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", "readOnlyRootFilesystem"},
		{"an object OLM cannot install", "kind: Service\n", "kind: Ingress\n", "cannot go into a registry+v1 bundle"},
		{"a CRD the CSV does not own", "name: widgets.example.dev", "name: gadgets.example.dev", "does not list the CRD gadgets.example.dev"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := widgetInputs(t)
			if !bytes.Contains(in.Kustomized, []byte(tc.old)) {
				t.Fatalf("testdata has no %q", tc.old)
			}
			in.Kustomized = bytes.Replace(in.Kustomized, []byte(tc.old), []byte(tc.new), 1)
			_, err := Bundle(in, widgetParams("1.0.0"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestInstallChangesOnlyTheOperatorImage(t *testing.T) {
	in := widgetInputs(t)
	out, err := Install(in.Kustomized, "example/widget-operator:2.0.0")
	if err != nil {
		t.Fatal(err)
	}
	before, _ := decodeObjects(in.Kustomized)
	after, err := decodeObjects(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(before) != len(after) {
		t.Fatalf("%d objects, want %d", len(after), len(before))
	}
	for i := range before {
		if before[i].GetKind() == "Deployment" {
			continue
		}
		if !reflect.DeepEqual(before[i].Object, after[i].Object) {
			t.Errorf("%s %s changed", before[i].GetKind(), before[i].GetName())
		}
	}
	s := string(out)
	if !strings.Contains(s, "image: example/widget-operator:2.0.0") || !strings.Contains(s, "value: example/widget-operator:2.0.0") ||
		!strings.Contains(s, "image: example/sidecar:1") || strings.Contains(s, "controller:latest") {
		t.Errorf("install file:\n%s", s)
	}
}

// TestCatalogTakesTheNextRelease adds 1.0.0, then 1.1.0 replacing it, and
// wants both in the channel with 1.1.0 at its head.
func TestCatalogTakesTheNextRelease(t *testing.T) {
	bundleOf := func(p Params) *ReadBundle {
		files, err := Bundle(widgetInputs(t), p)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := WriteFiles(dir, files, BundleDirs...); err != nil {
			t.Fatal(err)
		}
		b, err := LoadBundle(os.DirFS(filepath.Join(dir, BundleDir)))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cfg, err := Catalog(nil, bundleOf(widgetParams("1.0.0")), "example/widget-bundle:v1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	first, err := WriteCatalog(cfg)
	if err != nil {
		t.Fatal(err)
	}
	next := widgetParams("1.1.0")
	next.Replaces = "widget-operator.v1.0.0"
	if cfg, err = Catalog(cfg, bundleOf(next), "example/widget-bundle:v1.1.0"); err != nil {
		t.Fatal(err)
	}
	data, err := WriteCatalog(cfg)
	if err != nil {
		t.Fatal(err)
	}
	reread, err := ReadCatalog(data)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ValidateCatalog(reread)
	if err != nil {
		t.Fatal(err)
	}
	ch := m["widget-operator"].Channels["candidate"]
	head, err := ch.Head()
	if err != nil {
		t.Fatal(err)
	}
	if head.Name != "widget-operator.v1.1.0" || head.Replaces != "widget-operator.v1.0.0" || head.SkipRange != ">=0.0.0 <1.1.0" || len(ch.Bundles) != 2 {
		t.Errorf("head %s replaces %q skipRange %q, %d bundles", head.Name, head.Replaces, head.SkipRange, len(ch.Bundles))
	}

	// Adding the same bundle again changes nothing.
	cfg1, err := ReadCatalog(first)
	if err != nil {
		t.Fatal(err)
	}
	if cfg1, err = Catalog(cfg1, bundleOf(widgetParams("1.0.0")), "example/widget-bundle:v1.0.0"); err != nil {
		t.Fatal(err)
	}
	again, err := WriteCatalog(cfg1)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, again) {
		t.Errorf("re-adding a bundle changed the catalog:\n%s\nthen\n%s", first, again)
	}
}

func TestWriteFilesCleansOnlyTheGivenDirectories(t *testing.T) {
	dir := t.TempDir()
	if err := WriteFiles(dir, Files{"bundle/manifests/old.yaml": []byte("x"), "bundle/metadata/annotations.yaml": []byte("a")}); err != nil {
		t.Fatal(err)
	}
	if err := WriteFiles(dir, Files{InstallFile: []byte("i")}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "bundle/manifests/old.yaml")); err != nil {
		t.Errorf("writing %s removed the bundle: %v", InstallFile, err)
	}
	if err := WriteFiles(dir, Files{"bundle/manifests/new.yaml": []byte("y")}, BundleDirs...); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "bundle/manifests/old.yaml")); !os.IsNotExist(err) {
		t.Errorf("a file the bundle no longer has is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, InstallFile)); err != nil {
		t.Errorf("writing the bundle removed %s: %v", InstallFile, err)
	}
}
