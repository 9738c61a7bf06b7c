package olmenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/modelserver-dev/modelserver-operator/internal/ociimage"
	"github.com/modelserver-dev/modelserver-operator/test/nextchart"
	"github.com/modelserver-dev/modelserver-operator/test/realenv"
)

// Release is a next release of the operator, made from this tree the way
// a maintainer makes one (`make bundle catalog VERSION=... REPLACES=...`),
// with a chart that differs from this tree's.
type Release struct {
	Version string
	CSV     string
	// OperatorImage, BundleImage and CatalogImage are public names, served
	// by the cluster's registry. The catalog holds this tree's release and
	// the new one in the channel.
	OperatorImage, BundleImage, CatalogImage string
}

// ChartVersionAnnotation is what the next release's chart adds to the
// Service it renders (see nextchart.Change).
const ChartVersionAnnotation = nextchart.VersionAnnotation

// MakeRelease returns the next release for version: the one Start built,
// or one it builds and pushes now (see buildRelease).
func (e *Env) MakeRelease(ctx context.Context, version string) (*Release, error) {
	if r, ok := e.releases[version]; ok {
		return r, nil
	}
	r, images, err := buildRelease(ctx, e.Root, e.BinDir, filepath.Join(e.work, "release-"+version), version)
	if err != nil {
		return nil, err
	}
	if err := e.Push(ctx, images...); err != nil {
		return nil, err
	}
	return r, nil
}

// buildRelease copies the tree at root to src, changes its chart (a new
// chart version and an annotation on the Service, nothing the serving pods
// see), builds the operator's image from the copy, generates the bundle for
// version with bundlegen (replacing this tree's CSV, and skipping every
// version below it) and adds it to a copy of catalog/, and returns the
// release with its operator, bundle and catalog images, to push.
func buildRelease(ctx context.Context, root, binDir, src, version string) (*Release, []realenv.Image, error) {
	if err := nextchart.CopyTree(root, src); err != nil {
		return nil, nil, err
	}
	if err := nextchart.Change(src, CurrentVersion, version); err != nil {
		return nil, nil, err
	}
	bundleTag := "v" + version
	r := &Release{
		Version:       version,
		CSV:           Package + ".v" + version,
		OperatorImage: publicRef(OperatorRepo, version),
		BundleImage:   publicRef(BundleRepo, bundleTag),
		CatalogImage:  publicRef(CatalogRepo, bundleTag),
	}
	operator, err := realenv.BuildOperatorImage(ctx, src, filepath.Join(src, "image-bin"), version)
	if err != nil {
		return nil, nil, err
	}

	bundlegen, kustomize := filepath.Join(binDir, "bundlegen"), filepath.Join(binDir, "kustomize")
	for _, bin := range []string{bundlegen, kustomize} {
		if _, err := os.Stat(bin); err != nil {
			return nil, nil, fmt.Errorf("%s: run `make bundlegen tools`", bin)
		}
	}
	kustomized, err := run(ctx, src, "", kustomize, "build", "config/default")
	if err != nil {
		return nil, nil, err
	}
	if _, err := run(ctx, src, kustomized, bundlegen, "bundle", "--root", src, "--kustomized", "-",
		"--version", version, "--image", r.OperatorImage,
		"--replaces", CurrentCSV, "--skip-range", ">=0.0.0 <"+version); err != nil {
		return nil, nil, err
	}
	if _, err := run(ctx, src, "", bundlegen, "catalog", "--root", src, "--bundle-image", r.BundleImage); err != nil {
		return nil, nil, err
	}
	bundleSpec, err := BundleImage(filepath.Join(src, "bundle"))
	if err != nil {
		return nil, nil, err
	}
	bundle, err := ociimage.BuildLocal(bundleSpec)
	if err != nil {
		return nil, nil, err
	}
	catalogSpec, err := CatalogImage(ctx, binDir, filepath.Join(src, "catalog"), src)
	if err != nil {
		return nil, nil, err
	}
	catalog, err := ociimage.BuildLocal(catalogSpec)
	if err != nil {
		return nil, nil, err
	}
	return r, []realenv.Image{
		{Ref: OperatorRepo + ":" + version, Image: operator},
		{Ref: BundleRepo + ":" + bundleTag, Image: bundle},
		{Ref: CatalogRepo + ":" + bundleTag, Image: catalog},
	}, nil
}

// run runs a command in dir with stdin, and returns its standard output.
func run(ctx context.Context, dir, stdin, bin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}
