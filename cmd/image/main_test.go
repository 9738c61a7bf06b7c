package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/modelserver-dev/modelserver-operator/internal/ociimage"
)

// machines are the ELF machine of each architecture's binaries, and the
// name of the qemu user-mode emulator that runs them on another CPU.
var machines = map[string]struct {
	elf  elf.Machine
	qemu string
}{
	"amd64": {elf.EM_X86_64, "qemu-x86_64"},
	"arm64": {elf.EM_AARCH64, "qemu-aarch64"},
}

// The operator's image, as `make image` builds it, is an index with an
// image for each architecture, whose binaries are built for it and run:
// each manager starts, and each fetcher fetches the same model to the same
// digest (an architecture not this machine's runs under qemu's user-mode
// emulator).
func TestTheImageRunsOnEachArchitecture(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the operator for every architecture")
	}
	dir := t.TempDir()
	for _, arch := range ociimage.Arches {
		if err := buildBinaries(t.Context(), filepath.Join(dir, "bin", arch), arch); err != nil {
			t.Fatal(err)
		}
	}
	out, _, err := buildImage(filepath.Join(dir, "bin"), ociimage.Arches, "0.0.0-test")
	if err != nil {
		t.Fatal(err)
	}
	if err := ociimage.WriteLayout(filepath.Join(dir, "layout"), out, "test"); err != nil {
		t.Fatal(err)
	}

	idx := imageIndexOf(t, filepath.Join(dir, "layout"))
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != len(ociimage.Arches) {
		t.Fatalf("%d images in the index, want one for each of %v", len(m.Manifests), ociimage.Arches)
	}
	digests := map[string]string{}
	for _, d := range m.Manifests {
		arch := d.Platform.Architecture
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		manager, fetcher := unpack(t, img, arch, ociimage.OperatorBinary, dir), unpack(t, img, arch, ociimage.FetcherBinary, dir)
		if out, ok := runFor(t, arch, manager, "--help"); ok && !bytes.Contains(out, []byte("Usage of manager")) {
			t.Errorf("linux/%s manager --help:\n%s", arch, out)
		}
		digests[arch] = fetchWith(t, arch, fetcher)
	}
	if digests["amd64"] == "" || digests["amd64"] != digests["arm64"] {
		t.Errorf("the fetchers' digests of one model: %v; want one digest", digests)
	}
}

// imageIndexOf reads back the one index in the layout at dir, as a
// runtime reads what it pulls.
func imageIndexOf(t *testing.T, dir string) v1.ImageIndex {
	t.Helper()
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	named, err := top.IndexManifest()
	if err != nil || len(named.Manifests) != 1 {
		t.Fatalf("the layout's index: %v, %v; want one entry, the image's index", named, err)
	}
	idx, err := top.ImageIndex(named.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// unpack writes the image's file at p into dir, executable, after
// checking that it is a program for arch, and returns where it is.
func unpack(t *testing.T, img v1.Image, arch, p, dir string) string {
	t.Helper()
	content := fileOf(t, img, p)
	checkMachine(t, arch, p, content)
	out := filepath.Join(dir, arch+"-"+filepath.Base(p))
	if err := os.WriteFile(out, content, 0o755); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkMachine fails unless content is an executable for arch.
func checkMachine(t *testing.T, arch, name string, content []byte) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(content))
	if err != nil {
		t.Fatalf("linux/%s %s: %v", arch, name, err)
	}
	if f.Machine != machines[arch].elf {
		t.Errorf("linux/%s %s is for %s", arch, name, f.Machine)
	}
}

// fileOf is the content of the file at p in img's layers.
func fileOf(t *testing.T, img v1.Image, p string) []byte {
	t.Helper()
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			t.Fatalf("no %s in the image", p)
		}
		if err != nil {
			t.Fatal(err)
		}
		if "/"+strings.TrimPrefix(filepath.Clean(h.Name), "/") == p {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}

// runFor runs an arch binary with args (under qemu's user-mode emulator
// for an architecture not this machine's) and returns its output; ok is
// false where the emulator is missing, which CI, which installs qemu, does
// not allow.
func runFor(t *testing.T, arch, binary string, args ...string) (out []byte, ok bool) {
	t.Helper()
	argv := append([]string{binary}, args...)
	if arch != runtime.GOARCH {
		emulator, err := exec.LookPath(machines[arch].qemu)
		if err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("no %s to run the linux/%s binaries: apt-get install qemu-user", machines[arch].qemu, arch)
			}
			t.Logf("no %s: the linux/%s binaries are not run", machines[arch].qemu, arch)
			return nil, false
		}
		argv = append([]string{emulator}, argv...)
	}
	out, err := exec.CommandContext(t.Context(), argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("linux/%s %s: %v\n%s", arch, strings.Join(args, " "), err, out)
	}
	return out, true
}

// fetchWith runs the fetcher for arch on a test model and returns the
// model's digest from its one-line result, "" where it cannot run.
func fetchWith(t *testing.T, arch, fetcher string) string {
	t.Helper()
	dest, result := filepath.Join(t.TempDir(), "model"), filepath.Join(t.TempDir(), "result")
	model := mustAbs(t, "../../test/testdata/tf-serving/saved_model_half_plus_two_2_versions")
	if _, ok := runFor(t, arch, fetcher, "fetch", "-uri", model, "-dest", dest, "-termination-log", result); !ok {
		return ""
	}
	b, err := os.ReadFile(result)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Digest string `json:"digest"`
		Files  int    `json:"files"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Files == 0 {
		t.Fatalf("the linux/%s fetcher's result %q: %v", arch, b, err)
	}
	return r.Digest
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}
