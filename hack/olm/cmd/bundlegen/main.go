// Command bundlegen makes the operator's install artifacts from config/:
//
//	kustomize build config/default | bundlegen bundle --kustomized -   # bundle/, bundle.Dockerfile
//	bundlegen catalog                                                   # catalog/<package>/catalog.yaml
//	kustomize build config/default | bundlegen install --kustomized -  # dist/install.yaml
//	bundlegen validate --bundle bundle --catalog catalog                # what the OLM validators say
//
// Release parameters come from flags, else from the environment variables
// the Makefile uses: VERSION (0.1.0), CHANNELS (candidate), DEFAULT_CHANNEL
// (candidate), IMG (ghcr.io/modelserver-dev/modelserver-operator:$VERSION),
// REPLACES (none), SKIP_RANGE (>=0.0.0 <$VERSION) and BUNDLE_IMG
// (ghcr.io/modelserver-dev/modelserver-operator-bundle:v$VERSION).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/modelserver-dev/modelserver-operator/hack/olm/artifacts"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bundlegen:", err)
		os.Exit(1)
	}
}

const usage = "usage: bundlegen bundle|catalog|install|validate [flags] (-h for the flags of each)"

func run(args []string) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	switch args[0] {
	case "bundle":
		return runBundle(args[1:])
	case "catalog":
		return runCatalog(args[1:])
	case "install":
		return runInstall(args[1:])
	case "validate":
		return runValidate(args[1:])
	default:
		return fmt.Errorf("unknown command %q; %s", args[0], usage)
	}
}

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// readInput reads a file, or standard input for "-".
func readInput(name string) ([]byte, error) {
	if name == "" {
		return nil, errors.New("--kustomized is required: the output of `kustomize build config/default`, or - for standard input")
	}
	if name == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(name)
}

func runBundle(args []string) error {
	fs := flag.NewFlagSet("bundle", flag.ContinueOnError)
	root := fs.String("root", ".", "repository root: inputs are read and outputs written under it")
	kustomized := fs.String("kustomized", "", "output of `kustomize build config/default` (- for standard input)")
	version := fs.String("version", env("VERSION", artifacts.DefaultVersion), "operator version ($VERSION)")
	channels := fs.String("channels", env("CHANNELS", artifacts.DefaultChannel), "comma-separated channels ($CHANNELS)")
	defaultChannel := fs.String("default-channel", env("DEFAULT_CHANNEL", artifacts.DefaultChannel), "default channel ($DEFAULT_CHANNEL)")
	image := fs.String("image", os.Getenv("IMG"), "operator image ($IMG; default "+artifacts.DefaultImageRepo+":<version>)")
	replaces := fs.String("replaces", os.Getenv("REPLACES"), "CSV this one replaces, e.g. modelserver-operator.v0.1.0 ($REPLACES)")
	skipRange := fs.String("skip-range", os.Getenv("SKIP_RANGE"), "versions this one skips ($SKIP_RANGE; default >=0.0.0 <version)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	p := artifacts.DefaultParams(*version)
	p.Channels = splitList(*channels)
	p.DefaultChannel = *defaultChannel
	if *image != "" {
		p.Image = *image
	}
	p.Replaces = *replaces
	if *skipRange != "" {
		p.SkipRange = *skipRange
	}
	k, err := readInput(*kustomized)
	if err != nil {
		return err
	}
	in, err := artifacts.ReadInputs(*root, k)
	if err != nil {
		return err
	}
	files, err := artifacts.Bundle(in, p)
	if err != nil {
		return err
	}
	if err := artifacts.WriteFiles(*root, files, artifacts.BundleDirs...); err != nil {
		return err
	}
	fmt.Printf("wrote %s/ and %s for %s (image %s)\n", artifacts.BundleDir, artifacts.BundleDockerfile, p.Version, p.Image)
	return nil
}

func runCatalog(args []string) error {
	fs := flag.NewFlagSet("catalog", flag.ContinueOnError)
	root := fs.String("root", ".", "repository root")
	bundleDir := fs.String("bundle", artifacts.BundleDir, "bundle directory, relative to the root")
	image := fs.String("bundle-image", os.Getenv("BUNDLE_IMG"), "bundle image ($BUNDLE_IMG; default "+artifacts.DefaultBundleRepo+":v<version>)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	b, err := artifacts.LoadBundle(os.DirFS(filepath.Join(*root, *bundleDir)))
	if err != nil {
		return err
	}
	if *image == "" {
		*image = artifacts.DefaultBundleImage(b.CSV.Spec.Version.String())
	}
	file := filepath.Join(*root, artifacts.CatalogFile(b.Package))
	existing, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	cfg, err := artifacts.ReadCatalog(existing)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	cfg, err = artifacts.Catalog(cfg, b, *image)
	if err != nil {
		return err
	}
	data, err := artifacts.WriteCatalog(cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s with %s (%s)\n", artifacts.CatalogFile(b.Package), b.CSV.Name, *image)
	return nil
}

func runInstall(args []string) error {
	fs := flag.NewFlagSet("install", flag.ContinueOnError)
	root := fs.String("root", ".", "repository root")
	kustomized := fs.String("kustomized", "", "output of `kustomize build config/default` (- for standard input)")
	version := fs.String("version", env("VERSION", artifacts.DefaultVersion), "operator version ($VERSION), for the default image")
	image := fs.String("image", os.Getenv("IMG"), "operator image ($IMG; default "+artifacts.DefaultImageRepo+":<version>)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *image == "" {
		*image = artifacts.DefaultParams(*version).Image
	}
	k, err := readInput(*kustomized)
	if err != nil {
		return err
	}
	data, err := artifacts.Install(k, *image)
	if err != nil {
		return err
	}
	if err := artifacts.WriteFiles(*root, artifacts.Files{artifacts.InstallFile: data}); err != nil {
		return err
	}
	fmt.Printf("wrote %s (image %s)\n", artifacts.InstallFile, *image)
	return nil
}

func runValidate(args []string) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	bundleDir := fs.String("bundle", "", "bundle directory to validate")
	catalogDir := fs.String("catalog", "", "file-based catalog directory to validate")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *bundleDir == "" && *catalogDir == "" {
		return errors.New("validate: give --bundle, --catalog or both")
	}
	failed := false
	if *bundleDir != "" {
		f, err := artifacts.ValidateBundle(*bundleDir)
		if err != nil {
			return err
		}
		fmt.Printf("bundle %s: %s", *bundleDir, f)
		failed = f.Failed()
	}
	if *catalogDir != "" {
		m, err := artifacts.LoadCatalog(context.Background(), os.DirFS(*catalogDir))
		if err != nil {
			return err
		}
		for name, pkg := range m {
			fmt.Printf("catalog %s: package %s, default channel %s, %d channels: valid\n", *catalogDir, name, pkg.DefaultChannel.Name, len(pkg.Channels))
		}
	}
	if failed {
		return errors.New("the bundle has errors or warnings")
	}
	return nil
}
