package ociimage

import (
	"fmt"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Index is the OCI image index of images, one per platform, each entry
// named by its image's os and architecture: a tag that names the index
// gives every node the image of its own platform.
func Index(images ...v1.Image) (v1.ImageIndex, error) {
	var adds []mutate.IndexAddendum
	seen := map[string]bool{}
	for _, img := range images {
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, fmt.Errorf("an image's config: %w", err)
		}
		p := cf.Platform()
		if p == nil || p.OS == "" || p.Architecture == "" {
			return nil, fmt.Errorf("an image for the index names no platform")
		}
		if seen[p.String()] {
			return nil, fmt.Errorf("two images for %s", p)
		}
		seen[p.String()] = true
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: p}})
	}
	if len(adds) == 0 {
		return nil, fmt.Errorf("an index of no image")
	}
	return mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...), nil
}

// OperatorImages are the operator's image for each of arches, made by
// build (Build or BuildLocal) from the binaries ImageBuildArgs built into
// binDir/ARCH, labelled with version unless it is "".
func OperatorImages(binDir string, arches []string, version string, build func(Spec) (v1.Image, error)) ([]v1.Image, error) {
	var images []v1.Image
	for _, arch := range arches {
		spec, err := Operator(filepath.Join(binDir, arch))
		if err != nil {
			return nil, err
		}
		spec.Arch = arch
		if version != "" {
			spec.Labels[LabelVersion] = version
		}
		img, err := build(spec)
		if err != nil {
			return nil, fmt.Errorf("build the linux/%s image: %w", arch, err)
		}
		images = append(images, img)
	}
	return images, nil
}

// Taggable is what a tag names, an image or an index, as Push and
// WriteLayout take it, with its digest.
type Taggable interface {
	remote.Taggable
	Digest() (v1.Hash, error)
}

// ImageOrIndex is what a tag names for images: the image itself if there
// is one, as before there were others, else their Index.
func ImageOrIndex(images []v1.Image) (Taggable, error) {
	if len(images) == 1 {
		return images[0], nil
	}
	return Index(images...)
}
