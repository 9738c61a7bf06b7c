package release

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/kube"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/rest"
)

// renderParsedOnce makes revision 1 of a release, and the objects of its
// manifest, as render and Helm's Build make them, parsing each rendered
// manifest once instead of twice.
//
// Helm's install parses every manifest it renders to sort them (by kind,
// and hooks apart), keeps only the text, and Build parses the text again
// into objects: two YAML parses of the same documents, a tenth of the
// operator's CPU during a burst of installs and as much again in the
// garbage they leave. Here one parse serves both. The rest is Helm's own:
// its values, its template engine, its order of kinds and its layout of
// the manifest. TestParsedOnceIsHelmsRender holds the two to the same
// release and objects.
//
// ok is false for anything this path does not handle as Helm would, or
// handles only at a cost of its own — a dependency, a hook, an incompatible
// Kubernetes version, a document that does not decode, a List, a kind the
// cluster does not serve — and for every error but the values' own. The
// caller then renders and builds with Helm, which makes the error Helm
// makes.
func (m *Manager) renderParsedOnce(cfg *action.Configuration, namespace, name string, ch *chart.Chart, vals map[string]any, digest string) (_ *helmrelease.Release, _ kube.ResourceList, ok bool, _ error) {
	return m.renderRevisionParsedOnce(cfg, namespace, name, ch, vals, digest, nil)
}

// renderRevisionParsedOnce is renderParsedOnce for the revision after
// previous, as Helm's upgrade renders it (nil: revision 1, as its install
// does): its number, its first deployment and its labels follow from
// previous, and the templates see an upgrade and the cluster's
// capabilities.
func (m *Manager) renderRevisionParsedOnce(cfg *action.Configuration, namespace, name string, ch *chart.Chart, vals map[string]any,
	digest string, previous *helmrelease.Release) (_ *helmrelease.Release, _ kube.ResourceList, ok bool, _ error) {
	if len(ch.Metadata.Dependencies) > 0 || len(ch.Dependencies()) > 0 || len(ch.CRDObjects()) > 0 ||
		chartutil.ValidateReleaseName(name) != nil {
		return nil, nil, false, nil
	}
	clusterCaps, err := m.capabilities()
	if err != nil {
		return nil, nil, false, nil
	}
	merged, checked, err := checkedValues(ch, vals)
	if err != nil {
		return nil, nil, true, err
	}
	if !checked {
		return nil, nil, false, nil
	}
	caps := clientOnlyCapabilities(clusterCaps)
	options := chartutil.ReleaseOptions{Name: name, Namespace: namespace, Revision: 1, IsInstall: true}
	if previous != nil {
		caps = clusterCaps
		options = chartutil.ReleaseOptions{Name: name, Namespace: namespace, Revision: previous.Version + 1, IsUpgrade: true}
	}
	if ch.Metadata.KubeVersion != "" && !chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, caps.KubeVersion.String()) {
		return nil, nil, false, nil
	}
	labels := map[string]string{LabelValuesDigest: digest}
	if driver.ContainsSystemLabels(labels) {
		return nil, nil, false, nil
	}
	if merged == nil {
		if merged, err = chartutil.CoalesceValues(ch, vals); err != nil {
			return nil, nil, false, nil
		}
	}
	toRender, err := renderValues(ch, merged, options, caps)
	if err != nil {
		return nil, nil, false, nil
	}
	files, ok := m.renderTemplates(ch, toRender)
	if !ok {
		return nil, nil, false, nil
	}

	notes := ""
	for file, text := range files {
		if strings.HasSuffix(file, "NOTES.txt") {
			if file == path.Join(ch.Name(), "templates", "NOTES.txt") {
				notes = text
			}
			delete(files, file)
		}
	}
	docs, ok := parseManifests(files)
	if !ok {
		return nil, nil, false, nil
	}

	var manifest strings.Builder
	resources := make(kube.ResourceList, 0, len(docs))
	for _, d := range docs {
		fmt.Fprintf(&manifest, "---\n# Source: %s\n%s\n", d.file, d.text)
		if d.obj == nil {
			continue
		}
		info, ok := m.infoOf(d.obj, namespace)
		if !ok {
			return nil, nil, false, nil
		}
		resources = append(resources, info)
	}

	now := cfg.Now()
	rel := &helmrelease.Release{
		Name:      name,
		Namespace: namespace,
		Chart:     ch,
		Config:    vals,
		Info:      &helmrelease.Info{FirstDeployed: now, LastDeployed: now, Notes: notes},
		Manifest:  manifest.String(),
		Version:   options.Revision,
		Labels:    labels,
	}
	if previous == nil {
		rel.SetStatus(helmrelease.StatusPendingInstall, "Dry run complete")
		return rel, resources, true, nil
	}
	rel.Info.FirstDeployed = previous.Info.FirstDeployed
	rel.Labels = upgradeLabels(previous.Labels, labels)
	rel.SetStatus(helmrelease.StatusPendingUpgrade, "Preparing upgrade")
	return rel, resources, true, nil
}

// upgradeLabels are the labels of an upgrade's revision, as Helm's upgrade
// makes them: the previous revision's, overridden by those given, without
// any whose value is "null".
func upgradeLabels(previous, given map[string]string) map[string]string {
	out := maps.Clone(previous)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, given)
	maps.DeleteFunc(out, func(_, v string) bool { return v == "null" })
	return out
}

// renderValues is what Helm's engine renders ch with: its release,
// capabilities and chart, and as .Values vals already merged into the
// chart's defaults. Helm's ToRenderValues merges them itself; given a copy
// of the chart without values it merges nothing, so the values are merged
// (a deep copy of the whole tree) once per install, not twice, and the
// rest stays laid out as Helm lays it out.
func renderValues(ch *chart.Chart, merged chartutil.Values, options chartutil.ReleaseOptions, caps *chartutil.Capabilities) (chartutil.Values, error) {
	top, err := chartutil.ToRenderValuesWithSchemaValidation(&chart.Chart{Metadata: ch.Metadata}, nil, options, caps, true)
	if err != nil {
		return nil, err
	}
	top["Values"] = merged
	return top, nil
}

// renderTemplates renders ch's templates with vals: from the templates
// parsed once where it can, else with Helm's engine.
func (m *Manager) renderTemplates(ch *chart.Chart, vals chartutil.Values) (map[string]string, bool) {
	if p := m.templates.of(ch); p != nil {
		if files, ok := p.render(ch, vals); ok {
			return files, true
		}
	}
	var e engine.Engine
	files, err := e.Render(ch, vals)
	return files, err == nil
}

// clientOnlyCapabilities are the capabilities Helm's install renders with
// in client-only mode, told the cluster's version and API groups.
func clientOnlyCapabilities(cluster *chartutil.Capabilities) *chartutil.Capabilities {
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = cluster.KubeVersion
	caps.APIVersions = append(caps.APIVersions, cluster.APIVersions...)
	return caps
}

// parsedDoc is one document of a rendered file: its text as the manifest
// holds it, and its object (nil for a document that is only comments).
type parsedDoc struct {
	file, text string
	kind       string
	obj        *unstructured.Unstructured
}

// installRank is each kind's place in Helm's order of install.
var installRank = func() map[string]int {
	r := make(map[string]int, len(releaseutil.InstallOrder))
	for i, kind := range releaseutil.InstallOrder {
		r[kind] = i
	}
	return r
}()

// parseManifests splits the rendered files into their documents, as Helm
// does, decodes each once, and puts them in Helm's order of install: the
// files by name, the documents of a file in turn, then stably by kind
// (kinds Helm orders first, in its order, then the others by name). ok is
// false for a hook, a List, or a document that does not decode.
func parseManifests(files map[string]string) (_ []parsedDoc, ok bool) {
	var docs []parsedDoc
	for _, file := range slices.Sorted(maps.Keys(files)) {
		text := files[file]
		if strings.HasPrefix(path.Base(file), "_") || strings.TrimSpace(text) == "" {
			continue
		}
		for _, doc := range splitManifest(text) {
			d, ok := parseDoc(file, doc)
			if !ok {
				return nil, false
			}
			docs = append(docs, d)
		}
	}
	slices.SortStableFunc(docs, func(a, b parsedDoc) int {
		ra, aKnown := installRank[a.kind]
		rb, bKnown := installRank[b.kind]
		switch {
		case aKnown && bKnown:
			return ra - rb
		case aKnown:
			return -1
		case bKnown:
			return 1
		default:
			return strings.Compare(a.kind, b.kind)
		}
	})
	return docs, true
}

func parseDoc(file, text string) (parsedDoc, bool) {
	// A line that starts with "---" inside a document splits it where
	// Build reads the manifest, and not always where Helm splits a file.
	if strings.HasPrefix(text, "---") || strings.Contains(text, "\n---") {
		return parsedDoc{}, false
	}
	// Build reads the document from the manifest, where a newline follows
	// it: a block scalar at its end keeps that newline.
	obj, ok := decodeDoc([]byte(text + "\n"))
	if !ok {
		return parsedDoc{}, false
	}
	d := parsedDoc{file: file, text: text}
	if obj == nil {
		return d, true
	}
	if obj.IsList() || obj.GetAPIVersion() == "" {
		return parsedDoc{}, false
	}
	// Helm reads the head of each document as strings; anything else
	// there is an error Helm reports.
	if _, found, err := unstructured.NestedString(obj.Object, "metadata", "name"); err != nil || !found {
		return parsedDoc{}, false
	}
	annotations, _, err := unstructured.NestedStringMap(obj.Object, "metadata", "annotations")
	if err != nil {
		return parsedDoc{}, false
	}
	if _, hook := annotations[helmrelease.HookAnnotation]; hook {
		return parsedDoc{}, false
	}
	d.kind, d.obj = obj.GetKind(), obj
	return d, true
}

// splitManifest splits a rendered file into its documents as Helm's
// releaseutil.SplitManifests does, in order, without its regular
// expression, `(?:^|\s*\n)---\s*` applied to the trimmed text, which
// took a tenth of a render's CPU. A separator is "---" at the start of the
// text, or "---" right after a newline together with the run of white
// space that ends in that newline; either takes the white space after it.
// Each document is trimmed, and empty ones are dropped.
// FuzzSplitManifestAsHelm holds the two to the same result.
func splitManifest(text string) []string {
	s := strings.TrimSpace(text)
	var docs []string
	add := func(doc string) {
		if doc != "" {
			docs = append(docs, strings.TrimSpace(doc))
		}
	}
	start, i := 0, 0
	if strings.HasPrefix(s, "---") {
		i = skipSpace(s, 3)
		start = i
	}
	for i < len(s) {
		if !isRESpace(s[i]) {
			i++
			continue
		}
		run := i
		i = skipSpace(s, i)
		if s[i-1] == '\n' && strings.HasPrefix(s[i:], "---") {
			add(s[start:run])
			i = skipSpace(s, i+3)
			start = i
		}
	}
	add(s[start:])
	return docs
}

// isRESpace is a regular expression's \s: tab, newline, form feed,
// carriage return and space.
func isRESpace(c byte) bool {
	return c == '\t' || c == '\n' || c == '\f' || c == '\r' || c == ' '
}

// skipSpace is the index of the first byte of s from i on that is not
// \s, or len(s).
func skipSpace(s string, i int) int {
	for i < len(s) && isRESpace(s[i]) {
		i++
	}
	return i
}

// infoOf is obj as Build makes it: mapped to its resource, with a client
// of its own for it, and put in namespace if it is namespaced and names
// none.
func (m *Manager) infoOf(obj *unstructured.Unstructured, namespace string) (*resource.Info, bool) {
	gvk := obj.GroupVersionKind()
	mapping, err := m.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, false
	}
	cfg := rest.CopyConfig(m.restConfig)
	cfg.ContentConfig = resource.UnstructuredPlusDefaultContentConfig()
	gv := gvk.GroupVersion()
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	if gv.Group == "" {
		cfg.APIPath = "/api"
	}
	client, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, false
	}
	info := &resource.Info{
		Client:          client,
		Mapping:         mapping,
		Namespace:       obj.GetNamespace(),
		Name:            obj.GetName(),
		Object:          obj,
		ResourceVersion: obj.GetResourceVersion(),
	}
	if info.Namespaced() && info.Namespace == "" {
		info.Namespace = namespace
		obj.SetNamespace(namespace)
	}
	return info, true
}
