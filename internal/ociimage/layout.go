package ociimage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// refNameAnnotation is how an OCI layout's index.json names an image (what
// `skopeo copy oci:DIR:NAME` and `ctr import` read).
const refNameAnnotation = "org.opencontainers.image.ref.name"

// WriteLayout writes img, an image or an image index (v1.Image or
// v1.ImageIndex), into the OCI image layout at dir, creating the layout if
// dir has none, under refName (e.g. "0.1.0" or a full reference), in place
// of one of the same name already there.
func WriteLayout(dir string, img remote.Taggable, refName string) error {
	p, err := layout.FromPath(dir)
	if err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, "index.json")); !errors.Is(statErr, fs.ErrNotExist) {
			return fmt.Errorf("open the OCI layout %s: %w", dir, err)
		}
		if p, err = layout.Write(dir, empty.Index); err != nil {
			return fmt.Errorf("create the OCI layout %s: %w", dir, err)
		}
	}
	named := match.Annotation(refNameAnnotation, refName)
	annotations := layout.WithAnnotations(map[string]string{refNameAnnotation: refName})
	switch t := img.(type) {
	case v1.Image:
		cf, cerr := t.ConfigFile()
		if cerr != nil || cf.Platform() == nil {
			return fmt.Errorf("the image's platform: config %v, error %v", cf, cerr)
		}
		err = p.ReplaceImage(t, named, annotations, layout.WithPlatform(*cf.Platform()))
	case v1.ImageIndex:
		err = p.ReplaceIndex(t, named, annotations)
	default:
		return fmt.Errorf("write %T into an OCI layout: not an image or an index", img)
	}
	if err != nil {
		return fmt.Errorf("write the image into the OCI layout %s: %w", dir, err)
	}
	return nil
}
