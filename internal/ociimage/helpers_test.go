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

// fakeBinaries is a directory of files that stand for the image's
// binaries, as ImageBuildArgs leaves them: manager, holding manager, and
// fetcher, holding "the fetcher".
func fakeBinaries(t *testing.T, manager string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range map[string]string{"manager": manager, "fetcher": "the fetcher"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func operatorImage(t *testing.T, binDir string) v1.Image {
	t.Helper()
	spec, err := Operator(binDir)
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
