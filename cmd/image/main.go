// Command image builds the operator's image without a container engine
// (`make image`) and pushes it to a registry on this machine, or writes it
// as an OCI image layout: the image the Dockerfile describes, from the
// same build of the manager and the fetcher.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/modelserver-dev/modelserver-operator/internal/ociimage"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run() error {
	push := flag.String("push", "", "reference to push to, e.g. 127.0.0.1:5000/modelserver-operator:0.1.0 (a registry on this machine)")
	layoutDir := flag.String("layout", "", "also write the image into this OCI image layout directory")
	archList := flag.String("arch", strings.Join(ociimage.Arches, ","), "the CPU architectures (GOARCH) to build the linux image for; more than one makes an image index of an image for each")
	binDir := flag.String("bin-dir", "", "a directory with static linux builds of manager and fetcher, in a subdirectory per architecture (DIR/amd64/manager), to use instead of building ./cmd/manager and ./cmd/fetcher")
	version := flag.String("version", "", "the image's "+ociimage.LabelVersion+" label (default: the tag of --push, else dev)")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	if *push == "" && *layoutDir == "" {
		return errors.New("nowhere to put the image: give --push REF and/or --layout DIR")
	}
	arches, err := parseArches(*archList)
	if err != nil {
		return err
	}
	if *version == "" {
		*version = versionOf(*push)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if *binDir == "" {
		tmp, err := os.MkdirTemp("", "modelserver-operator-image-")
		if err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(tmp) }()
		*binDir = tmp
		for _, arch := range arches {
			if err := buildBinaries(ctx, filepath.Join(*binDir, arch), arch); err != nil {
				return err
			}
		}
	}
	out, digest, err := buildImage(*binDir, arches, *version)
	if err != nil {
		return err
	}

	if *layoutDir != "" {
		refName := *push
		if refName == "" {
			refName = *version
		}
		if err := ociimage.WriteLayout(*layoutDir, out, refName); err != nil {
			return err
		}
		fmt.Printf("wrote %s as %s into the OCI layout %s\n", digest, refName, *layoutDir)
	}
	if *push != "" {
		if err := ociimage.Push(ctx, out, *push); err != nil {
			if errors.Is(err, ociimage.ErrNoRegistry) {
				return fmt.Errorf("%w\nstart a registry there: make registry (REGISTRY=host:port), or make cluster-up REAL_NODE=1", err)
			}
			return err
		}
		fmt.Printf("pushed %s@%s\n", *push, digest)
	}
	return nil
}

// buildImage makes the operator's image for each of arches from the
// binaries in binDir/ARCH: the image itself for one, the index of them
// for several (a v1.Image or a v1.ImageIndex), and its digest.
func buildImage(binDir string, arches []string, version string) (ociimage.Taggable, v1.Hash, error) {
	images, err := ociimage.OperatorImages(binDir, arches, version, ociimage.Build)
	if err != nil {
		return nil, v1.Hash{}, err
	}
	for i, img := range images {
		digest, err := img.Digest()
		if err != nil {
			return nil, v1.Hash{}, fmt.Errorf("the image's digest: %w", err)
		}
		size, err := imageSize(img)
		if err != nil {
			return nil, v1.Hash{}, err
		}
		fmt.Printf("built linux/%s: %s (%d bytes: manifest, config and layer)\n", arches[i], digest, size)
	}
	out, err := ociimage.ImageOrIndex(images)
	if err != nil {
		return nil, v1.Hash{}, err
	}
	digest, err := out.Digest()
	if err != nil {
		return nil, v1.Hash{}, fmt.Errorf("the digest: %w", err)
	}
	if len(images) > 1 {
		fmt.Printf("index %s of linux/%s\n", digest, strings.Join(arches, ", linux/"))
	}
	return out, digest, nil
}

var goarchName = regexp.MustCompile(`^[a-z0-9]+$`)

// parseArches reads --arch: GOARCH names, each once.
func parseArches(list string) ([]string, error) {
	var arches []string
	for a := range strings.SplitSeq(list, ",") {
		a = strings.TrimSpace(a)
		switch {
		case a == "":
			continue
		case !goarchName.MatchString(a):
			return nil, fmt.Errorf("--arch %q: not a GOARCH name", a)
		case slices.Contains(arches, a):
			return nil, fmt.Errorf("--arch names %s twice", a)
		}
		arches = append(arches, a)
	}
	if len(arches) == 0 {
		return nil, errors.New("--arch names no architecture")
	}
	return arches, nil
}

// buildBinaries runs the repository's one build of the image's binaries
// for arch (ociimage.ImageBuildArgs) into dir from the module's root,
// wherever this runs.
func buildBinaries(ctx context.Context, dir, arch string) error {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("find the module to build the manager in (go env GOMOD): %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return errors.New("not inside the operator's module: run from the repository, or give --bin-dir")
	}
	cmd := ociimage.ImageBuildCommand(ctx, filepath.Dir(gomod), dir, arch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	fmt.Fprintf(os.Stderr, "building the manager and the fetcher: %s go %s\n",
		strings.Join(ociimage.ImageBuildEnv(arch), " "), strings.Join(cmd.Args[1:], " "))
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build %s for linux/%s: %w", strings.Join(ociimage.ImagePackages(), " and "), arch, err)
	}
	return nil
}

// versionOf is the tag of ref, which is what `make image` sets to
// $(VERSION).
func versionOf(ref string) string {
	if r, err := name.ParseReference(ref); err == nil {
		if tag, ok := r.(name.Tag); ok && tag.TagStr() != "" {
			return tag.TagStr()
		}
	}
	return "dev"
}

// imageSize is what a pull transfers: the manifest, the config and the
// compressed layers.
func imageSize(img v1.Image) (int64, error) {
	manifest, err := img.RawManifest()
	if err != nil {
		return 0, fmt.Errorf("the image's manifest: %w", err)
	}
	m, err := img.Manifest()
	if err != nil {
		return 0, fmt.Errorf("the image's manifest: %w", err)
	}
	total := int64(len(manifest)) + m.Config.Size
	for _, l := range m.Layers {
		total += l.Size
	}
	return total, nil
}
