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
)

// refNameAnnotation is how an OCI layout's index.json names an image (what
// `skopeo copy oci:DIR:NAME` and `ctr import` read).
const refNameAnnotation = "org.opencontainers.image.ref.name"

// WriteLayout writes img into the OCI image layout at dir, creating the
// layout if dir has none, under refName (e.g. "0.1.0" or a full
// reference), in place of an image of the same name already there.
func WriteLayout(dir string, img v1.Image, refName string) error {
	p, err := layout.FromPath(dir)
	if err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, "index.json")); !errors.Is(statErr, fs.ErrNotExist) {
			return fmt.Errorf("open the OCI layout %s: %w", dir, err)
		}
		if p, err = layout.Write(dir, empty.Index); err != nil {
			return fmt.Errorf("create the OCI layout %s: %w", dir, err)
		}
	}
	err = p.ReplaceImage(img, match.Annotation(refNameAnnotation, refName),
		layout.WithAnnotations(map[string]string{refNameAnnotation: refName}),
		layout.WithPlatform(v1.Platform{OS: "linux", Architecture: "amd64"}))
	if err != nil {
		return fmt.Errorf("write the image into the OCI layout %s: %w", dir, err)
	}
	return nil
}
