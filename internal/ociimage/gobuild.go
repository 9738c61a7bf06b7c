package ociimage

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// ManagerPackage is the operator's main package.
const ManagerPackage = "./cmd/manager"

// ManagerBuildEnv and ManagerBuildArgs are the one build of the manager
// that goes into the image: `CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go
// build -trimpath -ldflags=-s -w -o OUTPUT ./cmd/manager`, the Dockerfile's
// builder stage (TestTheImageAndTheDockerfileAgree fails when they part).
// GOOS and GOARCH are set because the image is linux/amd64 whatever the
// machine that builds it.
func ManagerBuildEnv() []string {
	return []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64"}
}

// ManagerBuildArgs are the arguments of `go` that build the manager into
// output; see ManagerBuildEnv.
func ManagerBuildArgs(output string) []string {
	return []string{"build", "-trimpath", "-ldflags=-s -w", "-o", output, ManagerPackage}
}

// ManagerBuildCommand is the manager's build, to run in the module's root
// directory dir.
func ManagerBuildCommand(ctx context.Context, dir, output string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", ManagerBuildArgs(output)...)
	cmd.Dir = dir
	// Later entries win, so these override a GOOS or CGO_ENABLED of the
	// caller's environment.
	cmd.Env = append(os.Environ(), ManagerBuildEnv()...)
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
