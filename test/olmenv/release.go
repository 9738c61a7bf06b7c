package olmenv

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/modelserver-dev/modelserver-operator/internal/ociimage"
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
// Service it renders: the chart's version, so that a test sees which
// chart a release was made with.
const ChartVersionAnnotation = "modelserver.dev/chart-version"

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
	if err := copyTree(root, src); err != nil {
		return nil, nil, err
	}
	if err := changeChart(src, version); err != nil {
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

// changeChart gives the chart in the tree at src a new version and has its
// Service carry that version.
func changeChart(src, version string) error {
	chartDir := filepath.Join(src, "helm-charts", "modelserver")
	if err := replaceOnce(filepath.Join(chartDir, "Chart.yaml"), "\nversion: "+CurrentVersion+"\n", "\nversion: "+version+"\n"); err != nil {
		return err
	}
	return replaceOnce(filepath.Join(chartDir, "templates", "service.yaml"),
		"  {{- with .Values.service.annotations }}\n  annotations:\n    {{- include \"modelserver.stringMap\" . | nindent 4 }}\n  {{- end }}\n",
		"  annotations:\n    "+ChartVersionAnnotation+": {{ .Chart.Version | quote }}\n    {{- with .Values.service.annotations }}\n    {{- include \"modelserver.stringMap\" . | nindent 4 }}\n    {{- end }}\n")
}

func replaceOnce(file, old, new string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if strings.Count(string(data), old) != 1 {
		return fmt.Errorf("%s: expected exactly one %q to change; has the file changed?", file, old)
	}
	return os.WriteFile(file, []byte(strings.Replace(string(data), old, new, 1)), 0o644)
}

// copyTree copies the repository's sources (not bin/ or .git) to dst.
func copyTree(root, dst string) error {
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel == "bin" || rel == ".git" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, info.Mode().Perm())
	})
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
