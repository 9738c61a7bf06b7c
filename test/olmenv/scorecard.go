package olmenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/modelserver-dev/modelserver-operator/internal/ociimage"
)

// The images `operator-sdk scorecard` runs a test pod from: the tests'
// image, which the bundle's scorecard config names, and the init
// container's, which untars the bundle for them (its --untar-image).
// Both are on quay.io, which the real node pulls from the cluster's
// registry.
const (
	scorecardRegistry  = "quay.io"
	ScorecardTestRepo  = "operator-framework/scorecard-test"
	ScorecardUntarRepo = "operator-framework/scorecard-untar"
	// scorecardUser is the user both upstream images run as.
	scorecardUser = "1001"
	scorecardUID  = 1001
	// scorecardSDKModule builds the pinned operator-sdk and its test image.
	scorecardSDKModule = "hack/tools/operator-sdk"
	scorecardTestPkg   = "github.com/operator-framework/operator-sdk/images/scorecard-test"
)

// scorecardTestBin is where `make tools` puts the scorecard-test binary,
// built with operator-sdk in one `go build`.
const scorecardTestBin = "scorecard-test"

// ScorecardConfig is the scorecard config of a bundle directory, as
// operator-sdk finds it: through the bundle's test.config annotation.
func ScorecardConfig(bundleDir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(bundleDir, "metadata", "annotations.yaml"))
	if err != nil {
		return "", err
	}
	var meta struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.Unmarshal(data, &meta); err != nil {
		return "", fmt.Errorf("%s/metadata/annotations.yaml: %w", bundleDir, err)
	}
	dir, ok := meta.Annotations["operators.operatorframework.io.test.config.v1"]
	if !ok {
		return "", fmt.Errorf("%s has no scorecard config: its annotations name no operators.operatorframework.io.test.config.v1 (make bundle adds it from config/scorecard)", bundleDir)
	}
	return filepath.Join(bundleDir, filepath.FromSlash(dir), "config.yaml"), nil
}

// scorecardTestImages are the images the tests of a scorecard config run.
func scorecardTestImages(config string) ([]string, error) {
	data, err := os.ReadFile(config)
	if err != nil {
		return nil, err
	}
	var c struct {
		Stages []struct {
			Tests []struct {
				Image string `json:"image"`
			} `json:"tests"`
		} `json:"stages"`
	}
	if err := yaml.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", config, err)
	}
	seen := map[string]bool{}
	var images []string
	for _, s := range c.Stages {
		for _, t := range s.Tests {
			if !seen[t.Image] {
				seen[t.Image] = true
				images = append(images, t.Image)
			}
		}
	}
	if len(images) == 0 {
		return nil, fmt.Errorf("%s has no tests", config)
	}
	return images, nil
}

// PushScorecardImages builds the images a scorecard run of bundleDir pulls
// from the pinned operator-sdk and pushes them under upstream's names: the
// test image under each name the bundle's config gives it, and the untar
// image tagged as the test image is. It returns the untar image's public
// name, for --untar-image: operator-sdk's default names upstream's by a
// digest no local build can have. logf hears of a build of the test
// binary.
func (e *Env) PushScorecardImages(ctx context.Context, bundleDir string, logf func(string, ...any)) (untarImage string, err error) {
	config, err := ScorecardConfig(bundleDir)
	if err != nil {
		return "", err
	}
	images, err := scorecardTestImages(config)
	if err != nil {
		return "", err
	}
	// operator-sdk pairs one untar image with one release of its tests.
	if len(images) != 1 {
		return "", fmt.Errorf("%s names the test images %q, want one", config, images)
	}
	repoTag, ok := strings.CutPrefix(images[0], scorecardRegistry+"/")
	repo, tag, tagged := strings.Cut(repoTag, ":")
	if !ok || !tagged || repo != ScorecardTestRepo {
		return "", fmt.Errorf("%s: test image %s is not %s/%s:<tag>, so this environment cannot serve it", config, images[0], scorecardRegistry, ScorecardTestRepo)
	}
	bin, err := e.scorecardTestBinary(ctx, logf)
	if err != nil {
		return "", err
	}
	untar, err := ScorecardUntarImage()
	if err != nil {
		return "", err
	}
	if _, err := e.pushSpec(ctx, ScorecardTestImage(bin), repoTag); err != nil {
		return "", err
	}
	if _, err := e.pushSpec(ctx, untar, ScorecardUntarRepo+":"+tag); err != nil {
		return "", err
	}
	return scorecardRegistry + "/" + ScorecardUntarRepo + ":" + tag, nil
}

// scorecardTestBinary is bin/scorecard-test, or, where `make tools` has
// not built it, a build of the same package from the same pinned module.
func (e *Env) scorecardTestBinary(ctx context.Context, logf func(string, ...any)) (string, error) {
	bin := filepath.Join(e.BinDir, scorecardTestBin)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	out := filepath.Join(e.work, scorecardTestBin)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-tags", "containers_image_openpgp", "-o", out, scorecardTestPkg)
	cmd.Dir = filepath.Join(e.Root, scorecardSDKModule)
	// The image is linux/amd64 whatever this machine is; later entries win.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build %s in %s: %v\n%s", scorecardTestPkg, scorecardSDKModule, err, strings.TrimSpace(buf.String()))
	}
	logf("built %s from %s (%.1fs): no %s, which `make tools` builds", scorecardTestBin, scorecardSDKModule, time.Since(start).Seconds(), bin)
	return out, nil
}

// scorecardAccount is the account files of upstream's scorecard images,
// whose Dockerfiles add their user to UBI's.
func scorecardAccount(name string) []ociimage.File {
	return []ociimage.File{
		{Path: "/etc/passwd", Mode: 0o644, Content: []byte("root:x:0:0:root:/root:/sbin/nologin\n" + name + ":x:1001:0:" + name + " user:/opt/" + name + ":/sbin/nologin\n")},
		{Path: "/etc/group", Mode: 0o644, Content: []byte("root:x:0:\n")},
	}
}

// ScorecardTestImage is upstream's scorecard-test image: the binary on
// PATH, which each test's entrypoint names, run as 1001 in its home.
func ScorecardTestImage(binary string) ociimage.Spec {
	const home = "/opt/scorecard-test"
	return ociimage.Spec{
		Files: append(scorecardAccount("scorecard-test"),
			ociimage.File{Path: "/usr/local/bin/scorecard-test", Mode: 0o755, HostPath: binary}),
		Dirs:       append(baseDirs(), ociimage.Dir{Path: home, UID: scorecardUID}),
		Entrypoint: []string{"/usr/local/bin/scorecard-test"},
		User:       scorecardUser,
		Env:        []string{ociimage.DefaultPathEnv, "HOME=" + home, "USER_NAME=scorecard-test", "USER_UID=" + scorecardUser},
		WorkingDir: home,
	}
}

// ScorecardUntarImage is upstream's scorecard-untar image as scorecard
// uses it: the init container runs `tar xvzf` from PATH, which Debian's
// static busybox does as tar (upstream's is UBI's GNU tar; the image has
// no binary of operator-sdk's own).
func ScorecardUntarImage() (ociimage.Spec, error) {
	if err := checkBusybox("the scorecard-untar image"); err != nil {
		return ociimage.Spec{}, err
	}
	const home = "/opt/scorecard-untar"
	files := append(scorecardAccount("scorecard-untar"), busyboxApplets("/usr/bin", "tar", "gzip", "sh")...)
	return ociimage.Spec{
		Files:      files,
		Dirs:       append(baseDirs(), ociimage.Dir{Path: home, UID: scorecardUID}),
		User:       scorecardUser,
		Env:        []string{ociimage.DefaultPathEnv, "HOME=" + home},
		WorkingDir: home,
	}, nil
}
