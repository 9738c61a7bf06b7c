package olmenv

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"

	"sigs.k8s.io/yaml"

	"github.com/modelserver-dev/modelserver-operator/internal/ociimage"
	"github.com/modelserver-dev/modelserver-operator/test/realenv"
)

// The repositories of the project's published images. The catalog and the
// CSVs name them under ghcr.io, which the real node and OLM v1 pull from the
// cluster's registry.
const (
	OperatorRepo = "modelserver-dev/modelserver-operator"
	BundleRepo   = "modelserver-dev/modelserver-operator-bundle"
	CatalogRepo  = "modelserver-dev/modelserver-operator-catalog"
	// PublicRegistry is the registry the project publishes to.
	PublicRegistry = "ghcr.io"
)

// The images OLM itself runs, built here from the pinned sources, in the
// cluster's registry.
const (
	OPMRepo   = "localcluster/opm"
	IndexRepo = "localcluster/opm-index"
	OLMRepo   = "localcluster/olm"
	// SDKDecompressionRepo is operator-sdk v1.42.2's default decompression
	// image (fbcutil.DefaultInitImage), without its mirrored registry.
	SDKDecompressionRepo = "ubi9/ubi:9.7"
)

// opmUser is the user upstream's opm image runs as.
const (
	opmUser = "1001"
	opmUID  = 1001
)

// busybox is Debian's static busybox (busybox-static, a node dependency):
// the util image's cp, and the cat and gzip operator-sdk's registry pod runs.
const busybox = "/bin/busybox"

// checkBusybox fails, saying how to install it, where this machine lacks
// the busybox what needs.
func checkBusybox(what string) error {
	if _, err := os.Stat(busybox); err != nil {
		return fmt.Errorf("%s needs Debian's static busybox at %s: run `make node-deps` (busybox-static)", what, busybox)
	}
	return nil
}

// busyboxApplets are busybox in dir under each applet's name: busybox runs
// the applet its name says.
func busyboxApplets(dir string, applets ...string) []ociimage.File {
	files := make([]ociimage.File, 0, len(applets))
	for _, applet := range applets {
		files = append(files, ociimage.File{Path: path.Join(dir, applet), Mode: 0o755, HostPath: busybox})
	}
	return files
}

// opmFiles are the files of upstream's opm image: opm and the
// grpc_health_probe OLM's registry pods are probed with.
func opmFiles(binDir string) []ociimage.File {
	return []ociimage.File{
		{Path: "/bin/opm", Mode: 0o755, HostPath: filepath.Join(binDir, "opm")},
		{Path: "/bin/grpc_health_probe", Mode: 0o755, HostPath: filepath.Join(binDir, "grpc_health_probe")},
	}
}

// OPMImage is the opm image: the catalog-operator's --opmImage, which runs
// `opm alpha bundle extract` in every unpack Job, and operator-sdk's index
// image. It needs Debian's static busybox (OLMImage checks for it).
func OPMImage(binDir string) ociimage.Spec {
	// operator-sdk's registry pod starts opm through sh.
	files := append(baseFiles(), opmFiles(binDir)...)
	files = append(files, busyboxApplets("/bin", "sh")...)
	return ociimage.Spec{
		Files:      files,
		Dirs:       baseDirs(),
		Entrypoint: []string{"/bin/opm"},
		User:       opmUser,
		Env:        []string{ociimage.DefaultPathEnv},
		WorkingDir: "/",
	}
}

// OLMImage is OLM's own image, as upstream's: olm-operator,
// catalog-operator and packageserver, and the catalog-operator's
// --util-image, from which every unpack Job copies /bin/cpb with /bin/cp
// to run it in the bundle image. operator-sdk's registry pod decompresses
// the bundle with its cat and gzip.
func OLMImage(binDir string) (ociimage.Spec, error) {
	if err := checkBusybox("the OLM image"); err != nil {
		return ociimage.Spec{}, err
	}
	files := append(baseFiles(), busyboxApplets("/bin", "cp", "cat", "gzip", "sh")...)
	for bin, host := range map[string]string{"olm": "olm-operator", "catalog": "catalog-operator", "package-server": "packageserver", "cpb": "cpb"} {
		files = append(files, ociimage.File{Path: "/bin/" + bin, Mode: 0o755, HostPath: filepath.Join(binDir, host)})
	}
	return ociimage.Spec{
		Files:      files,
		Dirs:       baseDirs(),
		User:       opmUser,
		Env:        []string{ociimage.DefaultPathEnv},
		WorkingDir: "/",
	}, nil
}

// CatalogImage is what catalog.Dockerfile builds: the opm image serving the
// file-based catalog in configsDir from /configs, with its serving cache
// built in (by running the same opm on this machine, as the Dockerfile's
// RUN does), so that a malformed catalog fails here and not in the
// CatalogSource.
func CatalogImage(ctx context.Context, binDir, configsDir, workDir string) (ociimage.Spec, error) {
	cache := filepath.Join(workDir, "catalog-cache")
	if err := os.RemoveAll(cache); err != nil {
		return ociimage.Spec{}, err
	}
	// No profiling endpoint: opm's default, localhost:6060, is one port for
	// every suite building a catalog at once, and the second fails to bind.
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "opm"), "serve", configsDir, "--cache-dir="+cache, "--cache-only", "--pprof-addr=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return ociimage.Spec{}, fmt.Errorf("opm serve --cache-only %s: %v\n%s", configsDir, err, out)
	}
	files, dirs := append(baseFiles(), opmFiles(binDir)...), baseDirs()
	configs, err := treeFiles(configsDir, catalogConfigsDir, 0)
	if err != nil {
		return ociimage.Spec{}, err
	}
	// opm takes a lock in its cache: the image's user owns it, as the
	// Dockerfile's RUN (as that user) leaves it.
	cached, err := treeFiles(cache, catalogCacheDir, opmUID)
	if err != nil {
		return ociimage.Spec{}, err
	}
	for _, t := range []tree{configs, cached} {
		files, dirs = append(files, t.files...), append(dirs, t.dirs...)
	}
	return ociimage.Spec{
		Files:      files,
		Dirs:       dirs,
		Entrypoint: []string{"/bin/opm"},
		Cmd:        catalogCmd,
		User:       opmUser,
		Env:        []string{ociimage.DefaultPathEnv},
		WorkingDir: "/",
		Labels:     catalogLabels(),
	}, nil
}

// What catalog.Dockerfile says of the catalog image
// (TestTheCatalogImageAndCatalogDockerfileAgree).
const (
	catalogConfigsDir = "/configs"
	catalogCacheDir   = "/tmp/cache"
	// configsLabel tells OLM v1 and opm where an image's catalog is.
	configsLabel = "operators.operatorframework.io.index.configs.v1"
)

var catalogCmd = []string{"serve", catalogConfigsDir, "--cache-dir=" + catalogCacheDir}

func catalogLabels() map[string]string { return map[string]string{configsLabel: catalogConfigsDir} }

// BundleImage is what bundle.Dockerfile builds from a bundle directory:
// manifests/, metadata/ and tests/ (the scorecard's) on nothing, labelled with the bundle's
// annotations. It has no working directory of its own: OLM's cpb copies
// the bundle to ./bundle, which must be the unpack Job's volume at /bundle.
func BundleImage(bundleDir string) (ociimage.Spec, error) {
	data, err := os.ReadFile(filepath.Join(bundleDir, "metadata", "annotations.yaml"))
	if err != nil {
		return ociimage.Spec{}, err
	}
	var meta struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.Unmarshal(data, &meta); err != nil {
		return ociimage.Spec{}, fmt.Errorf("%s/metadata/annotations.yaml: %w", bundleDir, err)
	}
	var spec ociimage.Spec
	for _, sub := range []string{"manifests", "metadata", "tests"} {
		if _, err := os.Stat(filepath.Join(bundleDir, sub)); sub == "tests" && errors.Is(err, fs.ErrNotExist) {
			continue // the scorecard's configuration is optional
		}
		t, err := treeFiles(filepath.Join(bundleDir, sub), "/"+sub, 0)
		if err != nil {
			return ociimage.Spec{}, err
		}
		spec.Files, spec.Dirs = append(spec.Files, t.files...), append(spec.Dirs, t.dirs...)
	}
	spec.Labels = meta.Annotations
	return spec, nil
}

// tree is a directory of this machine laid out in an image.
type tree struct {
	files []ociimage.File
	dirs  []ociimage.Dir
}

// treeFiles lays the regular files under hostDir out under imageDir,
// world-readable, since OLM runs the bundle and catalog images as a user
// of its choosing; owned by uid (and its directories too).
func treeFiles(hostDir, imageDir string, uid int) (tree, error) {
	var t tree
	err := filepath.WalkDir(hostDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(hostDir, p)
		if err != nil {
			return err
		}
		at := path.Join(imageDir, filepath.ToSlash(rel))
		switch {
		case d.IsDir():
			t.dirs = append(t.dirs, ociimage.Dir{Path: at, Mode: 0o755, UID: uid, GID: uid})
		case d.Type().IsRegular():
			t.files = append(t.files, ociimage.File{Path: at, Mode: 0o644, HostPath: p, UID: uid, GID: uid})
		default:
			return fmt.Errorf("%s: only regular files go into an image", p)
		}
		return nil
	})
	return t, err
}

// The account files, directories and PATH of a distroless-like image, with
// opm's user 1001 added.
func baseFiles() []ociimage.File {
	return []ociimage.File{
		{Path: "/etc/passwd", Mode: 0o644, Content: []byte("root:x:0:0:root:/root:/sbin/nologin\nopm:x:1001:0:opm:/tmp:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{Path: "/etc/group", Mode: 0o644, Content: []byte("root:x:0:\nnonroot:x:65532:\n")},
		// Go's resolver and opm read it; opm writes one when it is missing.
		{Path: "/etc/nsswitch.conf", Mode: 0o644, Content: []byte("hosts: files dns\n")},
	}
}

func baseDirs() []ociimage.Dir {
	return []ociimage.Dir{{Path: "/tmp", Mode: 0o1777}}
}

// publicRef is repo:tag under the public registry's name.
func publicRef(repo, tag string) string { return PublicRegistry + "/" + repo + ":" + tag }

// pushSpec builds spec and pushes it as ref (without registry host).
func (e *Env) pushSpec(ctx context.Context, spec ociimage.Spec, ref string) (string, error) {
	img, err := ociimage.BuildLocal(spec)
	if err != nil {
		return "", fmt.Errorf("build %s: %w", ref, err)
	}
	if err := e.Push(ctx, realenv.Image{Ref: ref, Image: img}); err != nil {
		return "", err
	}
	return e.Pushed[ref], nil
}
