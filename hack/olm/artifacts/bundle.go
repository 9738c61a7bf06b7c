package artifacts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/blang/semver/v4"
	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Where the bundle's files go, relative to the repository root.
const (
	BundleDir        = "bundle"
	ManifestsDir     = "bundle/manifests"
	MetadataDir      = "bundle/metadata"
	AnnotationsFile  = "bundle/metadata/annotations.yaml"
	BundleDockerfile = "bundle.Dockerfile"
)

// Names the CSV gives the images it relates, so that a mirror can list them.
const (
	RelatedImageOperator = "operator"
	RelatedImageServing  = "tensorflow-serving"
	// RelatedImageServingGPU is the serving image's GPU variant, which the
	// operator runs for pods asking for nvidia.com/gpu.
	RelatedImageServingGPU = "tensorflow-serving-gpu"
)

// Environment of the operator container that the bundle sets: the image of
// the model-fetch Job (the operator's own) and the namespaces to watch,
// which OLM writes into the olm.targetNamespaces annotation of the pod
// template according to the OperatorGroup (empty: all namespaces).
const (
	envOperatorImage   = "RELATED_IMAGE_OPERATOR"
	envWatchNamespace  = "WATCH_NAMESPACE"
	targetNamespacesFP = "metadata.annotations['olm.targetNamespaces']"
)

// Params are what changes from one release to the next.
type Params struct {
	// Version of the operator, semver without a leading v.
	Version string
	// Channels the bundle is published in, and the package's default one.
	Channels       []string
	DefaultChannel string
	// Image of the operator.
	Image string
	// Replaces names the CSV this one upgrades, if any.
	Replaces string
	// SkipRange is the semver range of versions this one can upgrade from
	// directly, if any.
	SkipRange string
}

// Inputs are the files the bundle is made from.
type Inputs struct {
	// CSVBase is config/manifests/bases/<package>.clusterserviceversion.yaml.
	CSVBase []byte
	// Kustomized is the output of `kustomize build config/default`.
	Kustomized []byte
	// Samples are the files of config/samples, in order; their objects
	// become the CSV's alm-examples.
	Samples [][]byte
	// ServingImage is the TensorFlow Serving image the operator defaults
	// to (the API's DefaultImage); its -gpu variant is related too.
	ServingImage string
	// Scorecard is the output of `kustomize build config/scorecard`, or
	// nil for a bundle without scorecard tests.
	Scorecard []byte
}

// Files maps a path relative to the repository root to its content.
type Files map[string][]byte

// Bundle makes the registry+v1 bundle: the CSV, the CRDs and the other
// objects of config/default under bundle/manifests, bundle/metadata and
// bundle.Dockerfile.
func Bundle(in Inputs, p Params) (Files, error) {
	if _, err := semver.Parse(p.Version); err != nil {
		return nil, fmt.Errorf("version %q: %w", p.Version, err)
	}
	if len(p.Channels) == 0 || p.DefaultChannel == "" || !slices.Contains(p.Channels, p.DefaultChannel) {
		return nil, fmt.Errorf("channels %q must include the default channel %q", p.Channels, p.DefaultChannel)
	}
	if p.Image == "" {
		return nil, fmt.Errorf("no operator image")
	}

	var csv v1alpha1.ClusterServiceVersion
	if err := yaml.UnmarshalStrict(in.CSVBase, &csv); err != nil {
		return nil, fmt.Errorf("CSV base: %w", err)
	}
	pkg, _, ok := strings.Cut(csv.Name, ".v")
	if !ok || pkg == "" {
		return nil, fmt.Errorf("CSV base: metadata.name %q is not <package>.v<version>", csv.Name)
	}
	objs, err := decodeObjects(in.Kustomized)
	if err != nil {
		return nil, fmt.Errorf("kustomize output: %w", err)
	}

	files := Files{}
	if in.ServingImage == "" {
		return nil, fmt.Errorf("no TensorFlow Serving image")
	}
	crdScopes, err := ownedCRDs(objs, &csv, files)
	if err != nil {
		return nil, err
	}
	consumed := map[*unstructured.Unstructured]bool{}
	for _, o := range find(objs, "CustomResourceDefinition") {
		consumed[o] = true
	}
	for _, o := range find(objs, "Namespace") {
		consumed[o] = true // OLM installs into the namespace of the Subscription
	}

	strategy, err := installStrategy(objs, scopes{crds: crdScopes}, p.Image, consumed)
	if err != nil {
		return nil, err
	}

	examples, err := almExamples(in.Samples)
	if err != nil {
		return nil, err
	}

	name := pkg + ".v" + p.Version
	annotations := maps.Clone(csv.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations["alm-examples"] = examples
	annotations["containerImage"] = p.Image
	delete(annotations, "olm.skipRange")
	if p.SkipRange != "" {
		if _, err := semver.ParseRange(p.SkipRange); err != nil {
			return nil, fmt.Errorf("skip range %q: %w", p.SkipRange, err)
		}
		annotations["olm.skipRange"] = p.SkipRange
	}
	if p.Replaces != "" && !strings.HasPrefix(p.Replaces, pkg+".v") {
		return nil, fmt.Errorf("replaces %q is not a CSV of package %s (%s.v<version>)", p.Replaces, pkg, pkg)
	}

	// The CSV is the base as it is, with the generated fields set: nothing
	// that the base does not say appears.
	var doc map[string]any
	if err := yaml.Unmarshal(in.CSVBase, &doc); err != nil {
		return nil, fmt.Errorf("CSV base: %w", err)
	}
	if err := setAll(doc, map[string]any{
		"metadata.name":        name,
		"metadata.annotations": annotations,
		"spec.version":         p.Version,
		"spec.replaces":        p.Replaces,
		"spec.relatedImages": []v1alpha1.RelatedImage{
			{Name: RelatedImageOperator, Image: p.Image},
			{Name: RelatedImageServing, Image: in.ServingImage},
			{Name: RelatedImageServingGPU, Image: in.ServingImage + "-gpu"},
		},
		"spec.install": strategy,
	}); err != nil {
		return nil, err
	}
	csvYAML, err := yaml.Marshal(doc)
	if err != nil {
		return nil, err
	}
	if err := yaml.UnmarshalStrict(csvYAML, &v1alpha1.ClusterServiceVersion{}); err != nil {
		return nil, fmt.Errorf("generated CSV: %w", err)
	}
	files[path.Join(ManifestsDir, pkg+".clusterserviceversion.yaml")] = csvYAML

	for _, o := range objs {
		if consumed[o] {
			continue
		}
		name, data, err := extraManifest(o)
		if err != nil {
			return nil, err
		}
		files[path.Join(ManifestsDir, name)] = data
	}

	labels := bundleLabels(pkg, p.Channels, p.DefaultChannel)
	if in.Scorecard != nil {
		if err := checkScorecardConfig(in.Scorecard); err != nil {
			return nil, err
		}
		files[ScorecardConfigFile] = in.Scorecard
		labels["operators.operatorframework.io.test.mediatype.v1"] = "scorecard+v1"
		labels["operators.operatorframework.io.test.config.v1"] = scorecardInImage
	}
	ann, err := yaml.Marshal(map[string]any{"annotations": labels})
	if err != nil {
		return nil, err
	}
	files[AnnotationsFile] = ann
	files[BundleDockerfile] = bundleDockerfile(labels)
	return files, nil
}

// ownedCRDs writes the CRDs of the kustomize output into files, checks
// that the CSV base owns exactly them, and returns their scopes and the
// TensorFlow Serving image they default spec.image to.
func ownedCRDs(objs []*unstructured.Unstructured, csv *v1alpha1.ClusterServiceVersion, files Files) (map[string]scope, error) {
	owned := map[string]v1alpha1.CRDDescription{}
	for _, d := range csv.Spec.CustomResourceDefinitions.Owned {
		owned[d.Name] = d
	}
	crdScopes := map[string]scope{}
	for _, o := range find(objs, "CustomResourceDefinition") {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := toTyped(o, crd); err != nil {
			return nil, err
		}
		desc, ok := owned[crd.Name]
		if !ok {
			return nil, fmt.Errorf("CSV base: spec.customresourcedefinitions.owned does not list the CRD %s", crd.Name)
		}
		delete(owned, crd.Name)
		served := false
		for _, ver := range crd.Spec.Versions {
			if ver.Name == desc.Version && ver.Served && desc.Kind == crd.Spec.Names.Kind {
				served = true
			}
		}
		if !served {
			return nil, fmt.Errorf("CSV base: owned CRD %s is %s %s, but the CRD serves no such kind and version", crd.Name, desc.Kind, desc.Version)
		}
		sc := namespaced
		if crd.Spec.Scope == apiextensionsv1.ClusterScoped {
			sc = clusterWide
		}
		crdScopes[crd.Spec.Group+"/"+crd.Spec.Names.Plural] = sc
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			return nil, err
		}
		files[path.Join(ManifestsDir, crd.Spec.Group+"_"+crd.Spec.Names.Plural+".yaml")] = data
	}
	if len(owned) > 0 {
		return nil, fmt.Errorf("CSV base owns CRDs that config/default does not have: %v", slices.Sorted(maps.Keys(owned)))
	}
	return crdScopes, nil
}

// installStrategy turns the operator's Deployment, its ServiceAccount and
// the roles bound to that account into the CSV's install strategy, marking
// the objects it used as consumed. The Deployment's spec is kept as
// kustomize wrote it but for the image and the environment.
func installStrategy(objs []*unstructured.Unstructured, sc scopes, image string, consumed map[*unstructured.Unstructured]bool) (map[string]any, error) {
	deps := find(objs, "Deployment")
	if len(deps) != 1 {
		return nil, fmt.Errorf("config/default must have exactly one Deployment, the operator's; it has %d", len(deps))
	}
	consumed[deps[0]] = true
	u := deps[0].DeepCopy()
	if err := setOperatorImage(u, image); err != nil {
		return nil, err
	}
	if err := editOperatorContainer(u, func(c map[string]any) {
		setEnvVar(c, map[string]any{"name": envWatchNamespace, "valueFrom": map[string]any{
			"fieldRef": map[string]any{"fieldPath": targetNamespacesFP},
		}})
	}); err != nil {
		return nil, err
	}
	dep := &appsv1.Deployment{}
	if err := toTyped(u, dep); err != nil {
		return nil, err
	}
	c, err := operatorContainer(&dep.Spec.Template.Spec, dep.Spec.Template.Annotations)
	if err != nil {
		return nil, err
	}
	if err := checkSecurityContext(&dep.Spec.Template.Spec, c); err != nil {
		return nil, fmt.Errorf("Deployment %s: %w", dep.Name, err)
	}

	sa := dep.Spec.Template.Spec.ServiceAccountName
	if sa == "" {
		return nil, fmt.Errorf("Deployment %s names no serviceAccountName", dep.Name)
	}
	foundSA := false
	for _, o := range find(objs, "ServiceAccount") {
		if o.GetName() == sa {
			consumed[o] = true
			foundSA = true
		}
	}
	if !foundSA {
		return nil, fmt.Errorf("config/default has no ServiceAccount %s, the one Deployment %s runs as", sa, dep.Name)
	}

	var nsRules, clusterRules []rbacv1.PolicyRule
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		for _, o := range find(objs, kind) {
			b := &rbacv1.RoleBinding{} // a ClusterRoleBinding has the same fields
			if err := toTyped(o, b); err != nil {
				return nil, err
			}
			if !bindsOnly(b.Subjects, sa) {
				continue
			}
			role := findRole(objs, b.RoleRef)
			if role == nil {
				return nil, fmt.Errorf("%s %s binds %s %s, which config/default does not have", kind, b.Name, b.RoleRef.Kind, b.RoleRef.Name)
			}
			var r rbacv1.ClusterRole // a Role has the same fields
			if err := toTyped(role, &r); err != nil {
				return nil, err
			}
			if err := checkLeastPrivilege(role.GetKind()+" "+role.GetName(), r.Rules); err != nil {
				return nil, err
			}
			if role.GetKind() == "Role" {
				nsRules = appendUnique(nsRules, r.Rules...)
			} else {
				ns, cl, err := sc.splitByScope(r.Rules)
				if err != nil {
					return nil, fmt.Errorf("ClusterRole %s: %w", r.Name, err)
				}
				nsRules = appendUnique(nsRules, ns...)
				clusterRules = appendUnique(clusterRules, cl...)
			}
			consumed[o] = true
			consumed[role] = true
		}
	}

	// kustomize does not manage the Deployment once OLM installs it.
	labels := maps.Clone(dep.Labels)
	if labels["app.kubernetes.io/managed-by"] == "kustomize" {
		delete(labels, "app.kubernetes.io/managed-by")
	}
	spec := map[string]any{
		"deployments": []any{map[string]any{"name": dep.Name, "label": labels, "spec": u.Object["spec"]}},
	}
	if len(nsRules) > 0 {
		spec["permissions"] = []v1alpha1.StrategyDeploymentPermissions{{ServiceAccountName: sa, Rules: nsRules}}
	}
	if len(clusterRules) > 0 {
		spec["clusterPermissions"] = []v1alpha1.StrategyDeploymentPermissions{{ServiceAccountName: sa, Rules: clusterRules}}
	}
	return map[string]any{"strategy": v1alpha1.InstallStrategyNameDeployment, "spec": spec}, nil
}

// setAll sets fields of a document, given by dotted paths, to values,
// which go through JSON so that Go types become plain YAML. An empty string
// removes the field.
func setAll(doc map[string]any, fields map[string]any) error {
	for _, key := range slices.Sorted(maps.Keys(fields)) {
		v := fields[key]
		parts := strings.Split(key, ".")
		m := doc
		for _, part := range parts[:len(parts)-1] {
			next, ok := m[part].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[part] = next
			}
			m = next
		}
		last := parts[len(parts)-1]
		if s, ok := v.(string); ok && s == "" {
			delete(m, last)
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		var plain any
		if err := json.Unmarshal(b, &plain); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		m[last] = plain
	}
	return nil
}

// operatorContainer is the container named by the pod's
// kubectl.kubernetes.io/default-container annotation, or its only one.
func operatorContainer(spec *corev1.PodSpec, annotations map[string]string) (*corev1.Container, error) {
	name := annotations["kubectl.kubernetes.io/default-container"]
	if name == "" && len(spec.Containers) == 1 {
		name = spec.Containers[0].Name
	}
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i], nil
		}
	}
	return nil, fmt.Errorf("cannot tell the operator's container: set the kubectl.kubernetes.io/default-container annotation of the pod template")
}

// checkSecurityContext asks for what the restricted Pod Security Standard
// and the operator's own hardening want of the pod and its container.
func checkSecurityContext(pod *corev1.PodSpec, c *corev1.Container) error {
	psc, csc := pod.SecurityContext, c.SecurityContext
	var missing []string
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		missing = append(missing, "pod runAsNonRoot: true")
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		missing = append(missing, "pod seccompProfile RuntimeDefault")
	}
	if csc == nil || csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
		missing = append(missing, "container allowPrivilegeEscalation: false")
	}
	if csc == nil || csc.Capabilities == nil || !slices.Equal(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		missing = append(missing, "container capabilities drop [ALL]")
	}
	if csc == nil || csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem {
		missing = append(missing, "container readOnlyRootFilesystem: true")
	}
	if len(missing) > 0 {
		return fmt.Errorf("security context lacks %s", strings.Join(missing, ", "))
	}
	return nil
}

// bindsOnly tells whether a binding's subjects are exactly the ServiceAccount.
func bindsOnly(subjects []rbacv1.Subject, sa string) bool {
	return len(subjects) == 1 && subjects[0].Kind == rbacv1.ServiceAccountKind && subjects[0].Name == sa
}

func findRole(objs []*unstructured.Unstructured, ref rbacv1.RoleRef) *unstructured.Unstructured {
	for _, o := range find(objs, ref.Kind) {
		if o.GetName() == ref.Name {
			return o
		}
	}
	return nil
}

// bundleKinds are the kinds, besides the CSV and CRDs, that a registry+v1
// bundle may carry and that make sense for this operator.
var bundleKinds = map[string]bool{
	"ClusterRole": true, "ClusterRoleBinding": true, "ConfigMap": true, "NetworkPolicy": true,
	"PodDisruptionBudget": true, "PrometheusRule": true, "Role": true, "RoleBinding": true,
	"Secret": true, "Service": true, "ServiceAccount": true, "ServiceMonitor": true,
}

// extraManifest is an object of config/default that goes into the bundle
// as it is, without its namespace (OLM puts it in the operator's). Its file
// is named <name>_<group>_<version>_<kind>.yaml, as operator-sdk names it.
func extraManifest(o *unstructured.Unstructured) (string, []byte, error) {
	if !bundleKinds[o.GetKind()] {
		return "", nil, fmt.Errorf("%s %s cannot go into a registry+v1 bundle: drop it from config/default or make the operator create it", o.GetKind(), o.GetName())
	}
	o = o.DeepCopy()
	o.SetNamespace("")
	data, err := yaml.Marshal(o.Object)
	if err != nil {
		return "", nil, err
	}
	gv := strings.ReplaceAll(o.GetAPIVersion(), "/", "_")
	return fmt.Sprintf("%s_%s_%s.yaml", o.GetName(), gv, strings.ToLower(o.GetKind())), data, nil
}

// almExamples is the JSON array of the samples' objects.
func almExamples(samples [][]byte) (string, error) {
	list := []map[string]any{}
	for i, s := range samples {
		objs, err := decodeObjects(s)
		if err != nil {
			return "", fmt.Errorf("sample %d: %w", i, err)
		}
		for _, o := range objs {
			list = append(list, o.Object)
		}
	}
	if len(list) == 0 {
		return "", fmt.Errorf("no samples: alm-examples would be empty")
	}
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// bundleLabels are the bundle's annotations, also the labels of its image.
func bundleLabels(pkg string, channels []string, defaultChannel string) map[string]string {
	return map[string]string{
		"operators.operatorframework.io.bundle.mediatype.v1":       "registry+v1",
		"operators.operatorframework.io.bundle.manifests.v1":       "manifests/",
		"operators.operatorframework.io.bundle.metadata.v1":        "metadata/",
		"operators.operatorframework.io.bundle.package.v1":         pkg,
		"operators.operatorframework.io.bundle.channels.v1":        strings.Join(channels, ","),
		"operators.operatorframework.io.bundle.channel.default.v1": defaultChannel,
	}
}

func bundleDockerfile(labels map[string]string) []byte {
	var b bytes.Buffer
	b.WriteString("# The operator's OLM bundle image. Generated by `make bundle` (hack/olm/cmd/bundlegen); do not edit.\n")
	b.WriteString("FROM scratch\n\n")
	b.WriteString("# The labels are the annotations of bundle/metadata/annotations.yaml.\n")
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		fmt.Fprintf(&b, "LABEL %s=%s\n", k, labels[k])
	}
	b.WriteString("\nCOPY bundle/manifests /manifests/\n")
	b.WriteString("COPY bundle/metadata /metadata/\n")
	if _, ok := labels["operators.operatorframework.io.test.config.v1"]; ok {
		b.WriteString("COPY bundle/tests/scorecard /tests/scorecard/\n")
	}
	return b.Bytes()
}
