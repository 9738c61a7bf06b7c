package checks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/modelserver-dev/modelserver-operator/hack/olm/artifacts"
)

// root is the repository root, seen from this package's directory.
const root = "../../.."

func committedBundle(t *testing.T) *artifacts.ReadBundle {
	t.Helper()
	b, err := artifacts.LoadBundle(os.DirFS(filepath.Join(root, artifacts.BundleDir)))
	if err != nil {
		t.Fatalf("load bundle/ (make bundle writes it): %v", err)
	}
	return b
}

func TestBundlePassesTheOLMValidators(t *testing.T) {
	f, err := artifacts.ValidateBundle(filepath.Join(root, artifacts.BundleDir))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("validators: %s", f)
	if f.Failed() {
		t.Errorf("bundle/ does not pass the validators:\n%s", f)
	}
}

func TestCatalogResolvesToTheBundle(t *testing.T) {
	b := committedBundle(t)
	m, err := artifacts.LoadCatalog(context.Background(), os.DirFS(filepath.Join(root, artifacts.CatalogDir)))
	if err != nil {
		t.Fatal(err)
	}
	pkg, ok := m[b.Package]
	if !ok {
		t.Fatalf("catalog has no package %s; it has %d packages", b.Package, len(m))
	}
	if pkg.DefaultChannel == nil || pkg.DefaultChannel.Name != b.DefaultChannel {
		t.Errorf("default channel %v, want %s", pkg.DefaultChannel, b.DefaultChannel)
	}
	if pkg.Icon == nil || len(b.CSV.Spec.Icon) == 0 || string(pkg.Icon.Data) != b.CSV.Spec.Icon[0].Data {
		t.Errorf("the package's icon is not the CSV's")
	}
	for _, name := range b.Channels {
		ch, ok := pkg.Channels[name]
		if !ok {
			t.Errorf("catalog has no channel %s", name)
			continue
		}
		head, err := ch.Head()
		if err != nil {
			t.Errorf("channel %s: %v", name, err)
			continue
		}
		if head.Name != b.CSV.Name {
			t.Errorf("channel %s: head %s, want the bundle's CSV %s", name, head.Name, b.CSV.Name)
		}
		if !head.Version.Equals(b.CSV.Spec.Version.Version) {
			t.Errorf("channel %s: head version %s, want %s", name, head.Version, b.CSV.Spec.Version)
		}
		if want := artifacts.DefaultBundleImage(b.CSV.Spec.Version.String()); head.Image != want {
			t.Errorf("channel %s: head image %s, want %s", name, head.Image, want)
		}
		if head.SkipRange != b.CSV.Annotations["olm.skipRange"] || head.Replaces != b.CSV.Spec.Replaces {
			t.Errorf("channel %s: entry skipRange %q replaces %q, want the CSV's %q and %q", name,
				head.SkipRange, head.Replaces, b.CSV.Annotations["olm.skipRange"], b.CSV.Spec.Replaces)
		}
		if head.CsvJSON == "" && head.PropertiesP == nil {
			t.Errorf("channel %s: head bundle has no properties", name)
		}
		found := false
		for _, p := range head.PropertiesP.GVKs {
			found = found || (p.Group == "serving.modelserver.dev" && p.Version == "v1alpha1" && p.Kind == "ModelServer")
		}
		if !found {
			t.Errorf("channel %s: head bundle does not provide serving.modelserver.dev/v1alpha1 ModelServer: %+v", name, head.PropertiesP.GVKs)
		}
	}
}

// TestCommittedArtifactsAreUpToDate regenerates bundle/, bundle.Dockerfile,
// catalog/ and dist/install.yaml from config/ with the release parameters
// the committed files were made with, and wants the same bytes.
func TestCommittedArtifactsAreUpToDate(t *testing.T) {
	kustomized := kustomizeBuild(t)
	b := committedBundle(t)
	p := artifacts.Params{
		Version:        b.CSV.Spec.Version.String(),
		Channels:       b.Channels,
		DefaultChannel: b.DefaultChannel,
		Image:          b.CSV.Annotations["containerImage"],
		Replaces:       b.CSV.Spec.Replaces,
		SkipRange:      b.CSV.Annotations["olm.skipRange"],
	}
	in, err := artifacts.ReadInputs(root, kustomized)
	if err != nil {
		t.Fatal(err)
	}
	files, err := artifacts.Bundle(in, p)
	if err != nil {
		t.Fatalf("generate the bundle: %v", err)
	}
	tmp := t.TempDir()
	if err := artifacts.WriteFiles(tmp, files, artifacts.BundleDirs...); err != nil {
		t.Fatal(err)
	}

	catalogFile := artifacts.CatalogFile(b.Package)
	committedCatalog, err := os.ReadFile(filepath.Join(root, catalogFile))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := artifacts.ReadCatalog(committedCatalog)
	if err != nil {
		t.Fatal(err)
	}
	bundleImage := ""
	for _, x := range cfg.Bundles {
		if x.Name == b.CSV.Name {
			bundleImage = x.Image
		}
	}
	if bundleImage == "" {
		t.Fatalf("%s has no olm.bundle %s: run make catalog", catalogFile, b.CSV.Name)
	}
	regenerated, err := artifacts.LoadBundle(os.DirFS(filepath.Join(tmp, artifacts.BundleDir)))
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err = artifacts.Catalog(cfg, regenerated, bundleImage); err != nil {
		t.Fatalf("generate the catalog: %v", err)
	}
	if files[catalogFile], err = artifacts.WriteCatalog(cfg); err != nil {
		t.Fatal(err)
	}

	if files[artifacts.InstallFile], err = artifacts.Install(kustomized, p.Image); err != nil {
		t.Fatalf("generate %s: %v", artifacts.InstallFile, err)
	}

	for _, name := range slices.Sorted(maps.Keys(files)) {
		got, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Errorf("%s: %v (run make bundle catalog install-yaml and commit)", name, err)
			continue
		}
		if d := firstDifference(got, files[name]); d != "" {
			t.Errorf("%s differs from what config/ generates (run make bundle catalog install-yaml and commit): %s", name, d)
		}
	}
	for _, dir := range artifacts.BundleDirs {
		entries, err := os.ReadDir(filepath.Join(root, dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if _, ok := files[dir+"/"+e.Name()]; !ok {
				t.Errorf("%s/%s is not generated from config/ any more: run make bundle", dir, e.Name())
			}
		}
	}
}

// kustomizeBuild runs the repository's kustomize (make tools builds it).
func kustomizeBuild(t *testing.T) []byte {
	t.Helper()
	bin := filepath.Join(root, "bin", "kustomize")
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing: make test-olm builds it (make tools)", bin)
		}
		t.Skipf("%s is missing, so config/default cannot be built: run make test-olm, which builds it", bin)
	}
	cmd := exec.Command(bin, "build", filepath.Join(root, "config", "default"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kustomize build config/default: %v\n%s", err, stderr.String())
	}
	return out
}

// firstDifference describes where two files first differ, or returns "".
func firstDifference(committed, generated []byte) string {
	if bytes.Equal(committed, generated) {
		return ""
	}
	a, b := strings.Split(string(committed), "\n"), strings.Split(string(generated), "\n")
	line := func(l []string, i int) string {
		if i < len(l) {
			return fmt.Sprintf("%q", l[i])
		}
		return "(end of file)"
	}
	for i := 0; ; i++ {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			return fmt.Sprintf("line %d: committed %s, generated %s", i+1, line(a, i), line(b, i))
		}
	}
}

// TestServingImageIsTheAPIDefault wants the TensorFlow Serving image that
// the CSV relates, for mirroring, to be the one the API defaults to.
func TestServingImageIsTheAPIDefault(t *testing.T) {
	want, err := artifacts.ServingImage(root)
	if err != nil {
		t.Fatal(err)
	}
	b := committedBundle(t)
	got := map[string][]string{}
	for _, ri := range b.CSV.Spec.RelatedImages {
		got[ri.Name] = append(got[ri.Name], ri.Image)
	}
	if g := got[artifacts.RelatedImageServing]; len(g) != 1 || g[0] != want {
		t.Errorf("relatedImages %s: %q, want DefaultImage %q", artifacts.RelatedImageServing, g, want)
	}
	if g := got[artifacts.RelatedImageServingGPU]; len(g) != 1 || g[0] != want+"-gpu" {
		t.Errorf("relatedImages %s: %q, want %q", artifacts.RelatedImageServingGPU, g, want+"-gpu")
	}
	var op []string
	for _, ri := range b.CSV.Spec.RelatedImages {
		if ri.Name == artifacts.RelatedImageOperator {
			op = append(op, ri.Image)
		}
	}
	if len(op) != 1 || op[0] != b.CSV.Annotations["containerImage"] {
		t.Errorf("relatedImages %s: %q, want the containerImage %q", artifacts.RelatedImageOperator, op, b.CSV.Annotations["containerImage"])
	}
}

// TestALMExamplesAreTheSamples wants the examples a console offers to be
// config/samples.
func TestALMExamplesAreTheSamples(t *testing.T) {
	b := committedBundle(t)
	var got []map[string]any
	if err := json.Unmarshal([]byte(b.CSV.Annotations["alm-examples"]), &got); err != nil {
		t.Fatalf("alm-examples: %v", err)
	}
	in, err := artifacts.ReadInputs(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	var want []map[string]any
	for _, s := range in.Samples {
		for _, doc := range strings.Split(string(s), "\n---") {
			var m map[string]any
			if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
				t.Fatal(err)
			}
			if len(m) > 0 {
				want = append(want, m)
			}
		}
	}
	if len(want) == 0 {
		t.Fatal("config/samples has no objects")
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("alm-examples are not config/samples:\n got %v\nwant %v", got, want)
	}
}

// TestEveryExampleSpecFieldHasADescriptor asks what operator-sdk
// scorecard's olm-spec-descriptors test asks, without a cluster: every
// field an alm-example sets at the top of its spec has a spec descriptor
// in the CSV, so that a console shows it.
func TestEveryExampleSpecFieldHasADescriptor(t *testing.T) {
	b := committedBundle(t)
	var examples []map[string]any
	if err := json.Unmarshal([]byte(b.CSV.Annotations["alm-examples"]), &examples); err != nil {
		t.Fatalf("alm-examples: %v", err)
	}
	described := map[string]bool{}
	for _, crd := range b.CSV.Spec.CustomResourceDefinitions.Owned {
		for _, d := range crd.SpecDescriptors {
			described[d.Path] = true
		}
	}
	for _, ex := range examples {
		spec, _ := ex["spec"].(map[string]any)
		for field := range spec {
			if !described[field] {
				t.Errorf("alm-example %v sets spec.%s, which has no spec descriptor", ex["metadata"], field)
			}
		}
	}
}

// TestOperatorDeploymentAsOLMRunsIt checks what the operator needs from the
// bundle's Deployment and RBAC: its image for the fetch Job, the watched
// namespaces from the OperatorGroup, the restricted security context, and
// least privilege.
func TestOperatorDeploymentAsOLMRunsIt(t *testing.T) {
	b := committedBundle(t)
	spec := b.CSV.Spec.InstallStrategy.StrategySpec
	if b.CSV.Spec.InstallStrategy.StrategyName != v1alpha1.InstallStrategyNameDeployment || len(spec.DeploymentSpecs) != 1 {
		t.Fatalf("install strategy %q with %d deployments, want deployment with 1", b.CSV.Spec.InstallStrategy.StrategyName, len(spec.DeploymentSpecs))
	}
	pod := spec.DeploymentSpecs[0].Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	img := b.CSV.Annotations["containerImage"]
	if c.Image != img {
		t.Errorf("container image %s, want containerImage %s", c.Image, img)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if e := env["RELATED_IMAGE_OPERATOR"]; e.Value != img {
		t.Errorf("RELATED_IMAGE_OPERATOR %+v, want %s", e, img)
	}
	if e := env["WATCH_NAMESPACE"]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.annotations['olm.targetNamespaces']" {
		t.Errorf("WATCH_NAMESPACE %+v, want it from olm.targetNamespaces", e)
	}
	psc, csc := pod.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v, want runAsNonRoot and seccomp RuntimeDefault", psc)
	}
	if csc == nil || csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation || csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem ||
		csc.Capabilities == nil || !reflect.DeepEqual(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container security context %+v, want no privilege escalation, a read-only root and no capabilities", csc)
	}

	var all []rbacv1.PolicyRule
	for _, p := range append(slices.Clone(spec.Permissions), spec.ClusterPermissions...) {
		if p.ServiceAccountName != pod.ServiceAccountName {
			t.Errorf("permissions for %s, want the Deployment's %s", p.ServiceAccountName, pod.ServiceAccountName)
		}
		all = append(all, p.Rules...)
	}
	for _, r := range all {
		for _, s := range slices.Concat(r.APIGroups, r.Resources, r.Verbs, r.NonResourceURLs) {
			if s == "*" {
				t.Errorf("wildcard in rule %+v", r)
			}
		}
	}
	// The IngressClasses, read only, say that no controller will serve a
	// ModelServer's Ingress.
	wantCluster := []rbacv1.PolicyRule{
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingressclasses"}, Verbs: []string{"list"}},
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	}
	if len(spec.ClusterPermissions) != 1 || !reflect.DeepEqual(spec.ClusterPermissions[0].Rules, wantCluster) {
		t.Errorf("clusterPermissions %+v, want only the IngressClasses' list and the metrics endpoint's token and access reviews %+v", spec.ClusterPermissions, wantCluster)
	}
}

// TestDescriptorsNameFieldsOfTheCRD wants every spec and status descriptor
// of the CSV to name a field the CRD has, so that renaming a field in api/
// without the CSV base fails.
func TestDescriptorsNameFieldsOfTheCRD(t *testing.T) {
	b := committedBundle(t)
	data, err := os.ReadFile(filepath.Join(root, artifacts.ManifestsDir, "serving.modelserver.dev_modelservers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	for _, owned := range b.CSV.Spec.CustomResourceDefinitions.Owned {
		if owned.Name != crd.Name {
			continue
		}
		var schema *apiextensionsv1.JSONSchemaProps
		for _, v := range crd.Spec.Versions {
			if v.Name == owned.Version {
				schema = v.Schema.OpenAPIV3Schema
			}
		}
		if schema == nil {
			t.Fatalf("CRD %s has no version %s", crd.Name, owned.Version)
		}
		check := func(top string, paths []string) {
			for _, p := range paths {
				s := schema.Properties[top]
				for _, part := range strings.Split(p, ".") {
					next, ok := s.Properties[part]
					if !ok {
						t.Errorf("descriptor %s.%s: the CRD has no such field", top, p)
						break
					}
					s = next
				}
			}
		}
		var spec, status []string
		for _, d := range owned.SpecDescriptors {
			spec = append(spec, d.Path)
		}
		for _, d := range owned.StatusDescriptors {
			status = append(status, d.Path)
		}
		check("spec", spec)
		check("status", status)
		if len(spec) == 0 || len(status) == 0 {
			t.Errorf("owned CRD %s has no spec or status descriptors", owned.Name)
		}
	}
}
