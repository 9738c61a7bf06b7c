package ociimage

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// The image's main packages: the operator, and the fetcher its fetch Jobs
// and serving pods run (a binary of its own so that they start without
// the operator's controllers).
const (
	ManagerPackage = "./cmd/manager"
	FetcherPackage = "./cmd/fetcher"
)

// ImagePackages are the packages of the image's one go build, in the
// Dockerfile's order.
func ImagePackages() []string { return []string{ManagerPackage, FetcherPackage} }

// Arches are the CPU architectures the operator's image is built for
// (all linux), the first the one an image of a single platform has.
var Arches = []string{"amd64", "arm64"}

// ImageBuildEnv and ImageBuildArgs are the one build of the binaries that
// go into the image for arch: `CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go
// build -trimpath -ldflags=-s -w -o DIR/ ./cmd/manager ./cmd/fetcher`,
// the Dockerfile's builder stage (TestTheImageAndTheDockerfileAgree fails
// when they part). One build, so that the two share what they compile.
// GOOS and GOARCH are set because the image is linux/arch whatever the
// machine that builds it.
func ImageBuildEnv(arch string) []string {
	return []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + arch}
}

// ImageBuildArgs are the arguments of `go` that build the image's
// binaries into the directory dir, each named after its package (manager,
// fetcher); see ImageBuildEnv.
func ImageBuildArgs(dir string) []string {
	return append([]string{"build", "-trimpath", "-ldflags=-s -w", "-o", strings.TrimSuffix(dir, "/") + "/"}, ImagePackages()...)
}

// ImageBuildCommand is the image's build for arch, to run in the module's
// root directory moduleDir.
func ImageBuildCommand(ctx context.Context, moduleDir, dir, arch string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", ImageBuildArgs(dir)...)
	cmd.Dir = moduleDir
	// Later entries win, so these override a GOOS or CGO_ENABLED of the
	// caller's environment.
	cmd.Env = append(os.Environ(), ImageBuildEnv(arch)...)
	return cmd
}

// GoBuild is a `go build` command line taken apart, so that two spellings
// of the same build compare equal.
type GoBuild struct {
	// Env holds the NAME=value words before `go`.
	Env map[string]string
	// Flags maps a flag's name (no dashes) to its value, "true" for a
	// boolean flag; -o is in Output instead.
	Flags    map[string]string
	Output   string
	Packages []string
}

// goBuildBoolFlags are the flags of `go build` that take no separate value
// word; every other flag in goBuildValueFlags does.
var (
	goBuildBoolFlags = []string{"a", "n", "x", "v", "race", "msan", "asan", "cover",
		"trimpath", "work", "linkshared", "modcacherw", "json", "buildvcs"}
	goBuildValueFlags = []string{"o", "p", "C", "asmflags", "buildmode", "compiler",
		"gccgoflags", "gcflags", "installsuffix", "ldflags", "mod", "modfile", "overlay",
		"pgo", "pkgdir", "tags", "toolexec", "covermode", "coverpkg"}
)

// ParseGoBuild takes apart words, already split as a shell would:
// [NAME=value...] go build [flags] [packages].
func ParseGoBuild(words []string) (GoBuild, error) {
	b := GoBuild{Env: map[string]string{}, Flags: map[string]string{}}
	i := 0
	for ; i < len(words) && words[i] != "go"; i++ {
		name, value, ok := strings.Cut(words[i], "=")
		if !ok || name == "" {
			return GoBuild{}, fmt.Errorf("%q before go build is not NAME=value", words[i])
		}
		b.Env[name] = value
	}
	if i+1 >= len(words) || words[i+1] != "build" {
		return GoBuild{}, fmt.Errorf("%q is not a go build command", strings.Join(words, " "))
	}
	rest := words[i+2:]
	for len(rest) > 0 && strings.HasPrefix(rest[0], "-") {
		flag := strings.TrimLeft(rest[0], "-")
		rest = rest[1:]
		name, value, hasValue := strings.Cut(flag, "=")
		switch {
		case slices.Contains(goBuildBoolFlags, name):
			if !hasValue {
				value = "true"
			}
		case slices.Contains(goBuildValueFlags, name):
			if !hasValue {
				if len(rest) == 0 {
					return GoBuild{}, fmt.Errorf("go build flag -%s has no value", name)
				}
				value, rest = rest[0], rest[1:]
			}
		default:
			return GoBuild{}, fmt.Errorf("go build flag -%s is not one ParseGoBuild knows", name)
		}
		if name == "o" {
			b.Output = value
			continue
		}
		b.Flags[name] = value
	}
	for _, p := range rest {
		if strings.HasPrefix(p, "-") {
			return GoBuild{}, fmt.Errorf("go build flag %s comes after the packages", p)
		}
	}
	b.Packages = rest
	return b, nil
}

// equal says whether b and o are the same build.
func (b GoBuild) equal(o GoBuild) bool {
	return maps.Equal(b.Env, o.Env) && maps.Equal(b.Flags, o.Flags) && b.Output == o.Output && slices.Equal(b.Packages, o.Packages)
}
