package artifacts

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/operator-framework/operator-registry/alpha/declcfg"
	"github.com/operator-framework/operator-registry/alpha/model"
	"github.com/operator-framework/operator-registry/alpha/property"
	"sigs.k8s.io/yaml"
)

// CatalogDir is the root of the file-based catalog.
const CatalogDir = "catalog"

// CatalogFile is where a package's file-based catalog goes.
func CatalogFile(pkg string) string { return path.Join(CatalogDir, pkg, "catalog.yaml") }

// ReadBundle is a bundle directory as the catalog needs it.
type ReadBundle struct {
	Package        string
	Channels       []string
	DefaultChannel string
	CSV            v1alpha1.ClusterServiceVersion
}

// LoadBundle reads the annotations and the CSV of a bundle directory.
func LoadBundle(bundle fs.FS) (*ReadBundle, error) {
	data, err := fs.ReadFile(bundle, "metadata/annotations.yaml")
	if err != nil {
		return nil, err
	}
	var ann struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.Unmarshal(data, &ann); err != nil {
		return nil, fmt.Errorf("metadata/annotations.yaml: %w", err)
	}
	out := &ReadBundle{
		Package:        ann.Annotations["operators.operatorframework.io.bundle.package.v1"],
		DefaultChannel: ann.Annotations["operators.operatorframework.io.bundle.channel.default.v1"],
	}
	for _, ch := range strings.Split(ann.Annotations["operators.operatorframework.io.bundle.channels.v1"], ",") {
		if ch = strings.TrimSpace(ch); ch != "" {
			out.Channels = append(out.Channels, ch)
		}
	}
	if out.Package == "" || len(out.Channels) == 0 {
		return nil, fmt.Errorf("metadata/annotations.yaml names no package or no channel")
	}
	entries, err := fs.ReadDir(bundle, "manifests")
	if err != nil {
		return nil, err
	}
	found := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".clusterserviceversion.yaml") {
			continue
		}
		data, err := fs.ReadFile(bundle, path.Join("manifests", e.Name()))
		if err != nil {
			return nil, err
		}
		if err := yaml.UnmarshalStrict(data, &out.CSV); err != nil {
			return nil, fmt.Errorf("manifests/%s: %w", e.Name(), err)
		}
		found++
	}
	if found != 1 {
		return nil, fmt.Errorf("bundle has %d CSVs under manifests/, want 1", found)
	}
	return out, nil
}

// Catalog adds a bundle to a package's file-based catalog (nil: an empty
// one), or replaces it there if the catalog has it: the olm.package with the
// bundle's default channel and its CSV's icon, an entry for it in each of
// its channels with the CSV's replaces, skips and skipRange as the upgrade
// edges, and the olm.bundle as `opm render --migrate-level
// bundle-object-to-csv-metadata` renders the bundle image. Other bundles
// and entries are kept, so the catalog accumulates releases.
func Catalog(cfg *declcfg.DeclarativeConfig, b *ReadBundle, bundleImage string) (*declcfg.DeclarativeConfig, error) {
	if cfg == nil {
		cfg = &declcfg.DeclarativeConfig{}
	}
	if bundleImage == "" {
		return nil, fmt.Errorf("no bundle image")
	}
	csv := b.CSV

	pkg := declcfg.Package{Schema: declcfg.SchemaPackage, Name: b.Package, DefaultChannel: b.DefaultChannel}
	if len(csv.Spec.Icon) > 0 {
		pkg.Icon = &declcfg.Icon{Data: []byte(csv.Spec.Icon[0].Data), MediaType: csv.Spec.Icon[0].MediaType}
	}
	if i := slices.IndexFunc(cfg.Packages, func(p declcfg.Package) bool { return p.Name == b.Package }); i >= 0 {
		pkg.Description = cfg.Packages[i].Description
		cfg.Packages[i] = pkg
	} else {
		cfg.Packages = append(cfg.Packages, pkg)
	}

	entry := declcfg.ChannelEntry{
		Name:      csv.Name,
		Replaces:  csv.Spec.Replaces,
		Skips:     csv.Spec.Skips,
		SkipRange: csv.Annotations["olm.skipRange"],
	}
	for _, chName := range b.Channels {
		i := slices.IndexFunc(cfg.Channels, func(c declcfg.Channel) bool { return c.Package == b.Package && c.Name == chName })
		if i < 0 {
			cfg.Channels = append(cfg.Channels, declcfg.Channel{Schema: declcfg.SchemaChannel, Name: chName, Package: b.Package})
			i = len(cfg.Channels) - 1
		}
		ch := &cfg.Channels[i]
		if j := slices.IndexFunc(ch.Entries, func(e declcfg.ChannelEntry) bool { return e.Name == entry.Name }); j >= 0 {
			ch.Entries[j] = entry
		} else {
			ch.Entries = append(ch.Entries, entry)
		}
	}

	bundle, err := renderBundle(b, bundleImage)
	if err != nil {
		return nil, err
	}
	if i := slices.IndexFunc(cfg.Bundles, func(x declcfg.Bundle) bool { return x.Package == b.Package && x.Name == csv.Name }); i >= 0 {
		cfg.Bundles[i] = bundle
	} else {
		cfg.Bundles = append(cfg.Bundles, bundle)
	}

	if _, err := ValidateCatalog(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// renderBundle is the olm.bundle of a bundle: its package and version, the
// kinds it provides, its CSV's metadata, and the images it relates (those
// of its CSV, its operator's containers and the bundle image itself).
func renderBundle(b *ReadBundle, bundleImage string) (declcfg.Bundle, error) {
	csv := b.CSV
	var props []property.Property
	for _, crd := range csv.Spec.CustomResourceDefinitions.Owned {
		_, group, ok := strings.Cut(crd.Name, ".")
		if !ok {
			return declcfg.Bundle{}, fmt.Errorf("owned CRD name %q is not <plural>.<group>", crd.Name)
		}
		props = append(props, property.MustBuildGVK(group, crd.Version, crd.Kind))
	}
	for _, api := range csv.Spec.APIServiceDefinitions.Owned {
		props = append(props, property.MustBuildGVK(api.Group, api.Version, api.Kind))
	}
	for _, crd := range csv.Spec.CustomResourceDefinitions.Required {
		_, group, _ := strings.Cut(crd.Name, ".")
		props = append(props, property.MustBuildGVKRequired(group, crd.Version, crd.Kind))
	}
	props = append(props, property.MustBuildPackage(b.Package, csv.Spec.Version.String()))
	sort.SliceStable(props, func(i, j int) bool {
		if props[i].Type != props[j].Type {
			return props[i].Type < props[j].Type
		}
		return string(props[i].Value) < string(props[j].Value)
	})
	props = append(props, property.MustBuildCSVMetadata(csv))

	var images []declcfg.RelatedImage
	seen := map[string]bool{}
	add := func(name, image string) {
		if image != "" && !seen[image] {
			seen[image] = true
			images = append(images, declcfg.RelatedImage{Name: name, Image: image})
		}
	}
	for _, ri := range csv.Spec.RelatedImages {
		add(ri.Name, ri.Image)
	}
	add("", bundleImage)
	for _, d := range csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs {
		for _, c := range append(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers...) {
			add("", c.Image)
		}
	}
	sort.Slice(images, func(i, j int) bool { return images[i].Image < images[j].Image })

	return declcfg.Bundle{
		Schema:        declcfg.SchemaBundle,
		Name:          csv.Name,
		Package:       b.Package,
		Image:         bundleImage,
		Properties:    props,
		RelatedImages: images,
	}, nil
}

// WriteCatalog writes a catalog as YAML, as opm does.
func WriteCatalog(cfg *declcfg.DeclarativeConfig) ([]byte, error) {
	var buf bytes.Buffer
	if err := declcfg.WriteYAML(*cfg, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ReadCatalog parses a catalog file.
func ReadCatalog(data []byte) (*declcfg.DeclarativeConfig, error) {
	return declcfg.LoadReader(bytes.NewReader(data))
}

// LoadCatalog loads a catalog directory as `opm serve` does and checks it
// as `opm validate` does.
func LoadCatalog(ctx context.Context, root fs.FS) (model.Model, error) {
	cfg, err := declcfg.LoadFS(ctx, root)
	if err != nil {
		return nil, fmt.Errorf("load catalog: %w", err)
	}
	return ValidateCatalog(cfg)
}

// ValidateCatalog converts a catalog to OLM's model, which checks its
// packages, channels and upgrade graph, and validates the model.
func ValidateCatalog(cfg *declcfg.DeclarativeConfig) (model.Model, error) {
	m, err := declcfg.ConvertToModel(*cfg)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	return m, nil
}
