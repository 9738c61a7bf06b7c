package ociimage

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// layerFile is one entry of an image's only layer.
type layerFile struct {
	header  *tar.Header
	content []byte
}

// readLayer returns the entries of img's one layer by path ("/etc/passwd"),
// and their order.
func readLayer(t *testing.T, img v1.Image) (map[string]layerFile, []string) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("the image has %d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	files := map[string]layerFile{}
	var order []string
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		p := "/" + filepath.Clean(h.Name)
		files[p] = layerFile{header: h, content: b}
		order = append(order, p)
	}
	return files, order
}

// fakeManager is a file that stands for the manager binary.
func fakeManager(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "manager")
	if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func operatorImage(t *testing.T, manager string) v1.Image {
	t.Helper()
	spec, err := Operator(manager)
	if err != nil {
		t.Fatal(err)
	}
	spec.Labels[LabelVersion] = "0.0.0-test"
	img, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	return img
}
