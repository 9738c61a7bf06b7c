// Package olmenv installs the operator the ways OLM users do, on the real
// node: it builds every image OLM runs (opm, the util image, the catalog
// from catalog/, the bundle from bundle/) from the pinned sources, serves
// them from the cluster's registry, and runs OLM v0 (olm-operator,
// catalog-operator, packageserver) or OLM v1 (catalogd,
// operator-controller) against the local control plane. It also makes a
// next release of the operator (a changed chart, its bundle and a catalog
// with both), so that an upgrade can go through a channel.
package olmenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/modelserver-dev/modelserver-operator/internal/ociimage"
	"github.com/modelserver-dev/modelserver-operator/test/realenv"
)

// The released version this tree is, as catalog/ and bundle/ name it.
const (
	Package         = "modelserver-operator"
	Channel         = "candidate"
	CurrentVersion  = "0.1.0"
	CurrentCSV      = Package + ".v" + CurrentVersion
	catalogImageTag = "v" + CurrentVersion
)

// Env is a real-node environment with OLM's images in its registry.
type Env struct {
	*realenv.Env
	// BinDir holds the pinned OLM binaries (`make tools`).
	BinDir string
	// OPMImage is the catalog-operator's --opmImage; OLMImage runs OLM's
	// operators and is its --util-image. As pods pull them.
	OPMImage, OLMImage string
	// IndexImage is an empty file-based catalog on opm, for operator-sdk
	// run bundle's --index-image (the label tells operator-sdk its kind).
	IndexImage string
	// CatalogImage is the catalog built from catalog/, under its public
	// name; BundleImage the bundle built from bundle/.
	CatalogImage, BundleImage string
	work                      string
}

// Start brings up the real-node environment (see realenv) and pushes the
// images every OLM path uses.
func Start(ctx context.Context, opts realenv.Options) (_ *Env, err error) {
	base, err := realenv.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			base.Cluster.Stop()
		}
	}()
	e := &Env{Env: base, BinDir: filepath.Join(base.Root, "bin"), work: filepath.Join(base.Cluster.Dir, "olm")}
	if err := os.MkdirAll(e.work, 0o755); err != nil {
		return nil, err
	}
	for _, tool := range []string{"opm", "grpc_health_probe", "cpb", "olm-operator", "catalog-operator", "packageserver"} {
		if _, err := os.Stat(filepath.Join(e.BinDir, tool)); err != nil {
			return nil, fmt.Errorf("%s: run `make tools`", filepath.Join(e.BinDir, tool))
		}
	}
	step := time.Now()
	if e.OPMImage, err = e.pushSpec(ctx, OPMImage(e.BinDir), OPMRepo+":test"); err != nil {
		return nil, err
	}
	index := OPMImage(e.BinDir)
	index.Labels = catalogLabels()
	index.Dirs = append(index.Dirs, ociimage.Dir{Path: catalogConfigsDir})
	if e.IndexImage, err = e.pushSpec(ctx, index, IndexRepo+":test"); err != nil {
		return nil, err
	}
	olm, err := OLMImage(e.BinDir)
	if err != nil {
		return nil, err
	}
	if e.OLMImage, err = e.pushSpec(ctx, olm, OLMRepo+":test"); err != nil {
		return nil, err
	}
	// operator-sdk run bundle-upgrade has no flag for its decompression
	// image: OLM's image (busybox's sh, cat and gzip) stands in under the
	// name it pulls, as a mirror of it would in an air-gapped cluster.
	if _, err = e.pushSpec(ctx, olm, SDKDecompressionRepo); err != nil {
		return nil, err
	}
	if e.BundleImage, err = e.PushBundle(ctx, filepath.Join(e.Root, "bundle"), "v"+CurrentVersion); err != nil {
		return nil, err
	}
	if e.CatalogImage, err = e.PushCatalog(ctx, filepath.Join(e.Root, "catalog"), catalogImageTag); err != nil {
		return nil, err
	}
	opts.Logf("built and pushed the opm, OLM, bundle and catalog images (%.1fs)", time.Since(step).Seconds())
	return e, nil
}

// PushBundle builds the bundle image of bundleDir and pushes it under the
// project's public bundle name with tag; it returns that public name.
func (e *Env) PushBundle(ctx context.Context, bundleDir, tag string) (string, error) {
	spec, err := BundleImage(bundleDir)
	if err != nil {
		return "", err
	}
	if _, err := e.pushSpec(ctx, spec, BundleRepo+":"+tag); err != nil {
		return "", err
	}
	return publicRef(BundleRepo, tag), nil
}

// PushCatalog builds the catalog image of configsDir and pushes it under
// the project's public catalog name with tag; it returns that public name.
func (e *Env) PushCatalog(ctx context.Context, configsDir, tag string) (string, error) {
	spec, err := CatalogImage(ctx, e.BinDir, configsDir, e.work)
	if err != nil {
		return "", err
	}
	if _, err := e.pushSpec(ctx, spec, CatalogRepo+":"+tag); err != nil {
		return "", err
	}
	return publicRef(CatalogRepo, tag), nil
}
