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

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
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
	// releases are the next releases Start built, by version.
	releases map[string]*Release
}

// Start brings up the real-node environment (see realenv) with the images
// every OLM path uses in its registry, and each next release of versions
// (see MakeRelease). The images are built before the machine's real node is
// taken, which another suite may still hold.
func Start(ctx context.Context, opts realenv.Options, versions ...string) (*Env, error) {
	root, err := localcluster.RepositoryRoot()
	if err != nil {
		return nil, err
	}
	if err := localcluster.RealNodeSupport(""); err != nil {
		return nil, err
	}
	binDir := filepath.Join(root, "bin")
	for _, tool := range []string{"opm", "grpc_health_probe", "cpb", "olm-operator", "catalog-operator", "packageserver"} {
		if _, err := os.Stat(filepath.Join(binDir, tool)); err != nil {
			return nil, fmt.Errorf("%s: run `make tools`", filepath.Join(binDir, tool))
		}
	}
	work, err := localcluster.ScratchDir()
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(work) }()
	step := time.Now()
	images, err := olmImages(ctx, root, binDir, work)
	if err != nil {
		return nil, err
	}
	releases := map[string]*Release{}
	for _, v := range versions {
		r, imgs, err := buildRelease(ctx, root, binDir, filepath.Join(work, "release-"+v), v)
		if err != nil {
			return nil, fmt.Errorf("release %s: %w", v, err)
		}
		releases[v] = r
		images = append(images, imgs...)
	}
	opts.Logf("built the opm, OLM, bundle and catalog images, and those of the releases %q, before taking the real node (%.1fs)", versions, time.Since(step).Seconds())
	opts.Images = append(opts.Images, images...)
	base, err := realenv.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	e := &Env{Env: base, BinDir: binDir, work: filepath.Join(base.Cluster.Dir, "olm"), releases: releases}
	if err := os.MkdirAll(e.work, 0o755); err != nil {
		base.Cluster.Stop()
		return nil, err
	}
	e.OPMImage, e.IndexImage, e.OLMImage = base.Pushed[OPMRepo+":test"], base.Pushed[IndexRepo+":test"], base.Pushed[OLMRepo+":test"]
	e.BundleImage = publicRef(BundleRepo, "v"+CurrentVersion)
	e.CatalogImage = publicRef(CatalogRepo, catalogImageTag)
	return e, nil
}

// olmImages builds the images OLM runs (opm; OLM's operators, also as
// operator-sdk's decompression image), the empty index operator-sdk run
// bundle takes, and the bundle and catalog of this tree at root.
func olmImages(ctx context.Context, root, binDir, work string) ([]realenv.Image, error) {
	var out []realenv.Image
	add := func(spec ociimage.Spec, refs ...string) error {
		img, err := ociimage.BuildLocal(spec)
		if err != nil {
			return fmt.Errorf("build %s: %w", refs[0], err)
		}
		for _, ref := range refs {
			out = append(out, realenv.Image{Ref: ref, Image: img})
		}
		return nil
	}
	if err := add(OPMImage(binDir), OPMRepo+":test"); err != nil {
		return nil, err
	}
	index := OPMImage(binDir)
	index.Labels = catalogLabels()
	index.Dirs = append(index.Dirs, ociimage.Dir{Path: catalogConfigsDir})
	if err := add(index, IndexRepo+":test"); err != nil {
		return nil, err
	}
	olm, err := OLMImage(binDir)
	if err != nil {
		return nil, err
	}
	// operator-sdk run bundle-upgrade has no flag for its decompression
	// image: OLM's image (busybox's sh, cat and gzip) stands in under the
	// name it pulls, as a mirror of it would in an air-gapped cluster.
	if err := add(olm, OLMRepo+":test", SDKDecompressionRepo); err != nil {
		return nil, err
	}
	bundle, err := BundleImage(filepath.Join(root, "bundle"))
	if err != nil {
		return nil, err
	}
	if err := add(bundle, BundleRepo+":v"+CurrentVersion); err != nil {
		return nil, err
	}
	catalog, err := CatalogImage(ctx, binDir, filepath.Join(root, "catalog"), work)
	if err != nil {
		return nil, err
	}
	if err := add(catalog, CatalogRepo+":"+catalogImageTag); err != nil {
		return nil, err
	}
	return out, nil
}
