package ociimage

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

const repoDockerfile = "../../Dockerfile"

// TestTheImageAndTheDockerfileAgree holds `make image` (Operator and
// ImageBuildArgs) and `make docker-build` (the Dockerfile) to the same
// image: a change to either alone fails here.
func TestTheImageAndTheDockerfileAgree(t *testing.T) {
	f, err := os.Open(repoDockerfile)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	df, err := ParseDockerfile(f)
	if err != nil {
		t.Fatal(err)
	}
	img := operatorImage(t, fakeBinaries(t, "the manager"))
	for _, d := range disagreements(t, df, img, imageBuildWords("bin")) {
		t.Error(d)
	}
}

// TestADockerfileChangeAloneIsADisagreement shows that the test above
// fails when only the Dockerfile changes, for each thing it compares.
func TestADockerfileChangeAloneIsADisagreement(t *testing.T) {
	orig, err := os.ReadFile(repoDockerfile)
	if err != nil {
		t.Fatal(err)
	}
	img := operatorImage(t, fakeBinaries(t, "the manager"))
	for _, change := range [][2]string{
		{`ENTRYPOINT ["/manager"]`, `ENTRYPOINT ["/manager", "--leader-elect"]`},
		{"USER 65532:65532", "USER 65532"},
		{"WORKDIR /\n", "WORKDIR /app\n"},
		{"COPY --from=builder /workspace/bin/manager /workspace/bin/fetcher ./", "COPY --from=builder /workspace/bin/manager /workspace/bin/fetcher /bin/"},
		{"COPY --from=builder /workspace/bin/manager /workspace/bin/fetcher ./", "COPY --from=builder /workspace/bin/manager ./"},
		{" ./cmd/fetcher\n", "\n"},
		{"CGO_ENABLED=0 ", "CGO_ENABLED=1 "},
		{"-trimpath ", ""},
		{`-ldflags="-s -w"`, `-ldflags="-s"`},
		{"./cmd/manager", "./cmd/other"},
		{"ARG TARGETARCH=amd64", "ARG TARGETARCH=arm64"},
	} {
		if !strings.Contains(string(orig), change[0]) {
			t.Errorf("the Dockerfile no longer has %q: update this test", change[0])
			continue
		}
		changed := strings.Replace(string(orig), change[0], change[1], 1)
		df, err := ParseDockerfile(strings.NewReader(changed))
		if err != nil {
			continue // a Dockerfile that does not parse fails the test too
		}
		if len(disagreements(t, df, img, imageBuildWords("bin"))) == 0 {
			t.Errorf("with %q for %q, the image and the Dockerfile still agree", change[1], change[0])
		}
	}
}

// TestAGoSideChangeAloneIsADisagreement is the other side: the image or
// the build command changed without the Dockerfile.
func TestAGoSideChangeAloneIsADisagreement(t *testing.T) {
	f, err := os.Open(repoDockerfile)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	df, err := ParseDockerfile(f)
	if err != nil {
		t.Fatal(err)
	}
	bins := fakeBinaries(t, "the manager")
	build := imageBuildWords("bin")

	for name, edit := range map[string]func(*Spec){
		"entrypoint":     func(s *Spec) { s.Entrypoint = []string{"/manager", "run"} },
		"user":           func(s *Spec) { s.User = "65532" },
		"working dir":    func(s *Spec) { s.WorkingDir = "/home/nonroot" },
		"manager's path": func(s *Spec) { moveFile(s, OperatorBinary, "/bin/manager") },
		"fetcher's path": func(s *Spec) { moveFile(s, FetcherBinary, "/bin/fetcher") },
		"no fetcher": func(s *Spec) {
			s.Files = slices.DeleteFunc(s.Files, func(f File) bool { return f.Path == FetcherBinary })
		},
	} {
		spec, err := Operator(bins)
		if err != nil {
			t.Fatal(err)
		}
		edit(&spec)
		img, err := Build(spec)
		if err != nil {
			t.Fatal(err)
		}
		if len(disagreements(t, df, img, build)) == 0 {
			t.Errorf("with another %s in the image, it and the Dockerfile still agree", name)
		}
	}

	img := operatorImage(t, bins)
	for name, words := range map[string][]string{
		"no -trimpath":   slices.DeleteFunc(slices.Clone(build), func(w string) bool { return w == "-trimpath" }),
		"other ldflags":  replaceWord(build, "-ldflags=-s -w", "-ldflags=-w"),
		"CGO_ENABLED=1":  replaceWord(build, "CGO_ENABLED=0", "CGO_ENABLED=1"),
		"other package":  replaceWord(build, ManagerPackage, "./cmd/demo"),
		"no fetcher":     slices.DeleteFunc(slices.Clone(build), func(w string) bool { return w == FetcherPackage }),
		"another GOARCH": replaceWord(build, "GOARCH=amd64", "GOARCH=arm64"),
		"one more flag":  slices.Insert(slices.Clone(build), slices.Index(build, "build")+1, "-race"),
	} {
		if len(disagreements(t, df, img, words)) == 0 {
			t.Errorf("with a build command of %s, the image and the Dockerfile still agree", name)
		}
	}
}

// imageBuildWords is the repository's build command as words, building
// into the directory dir.
func imageBuildWords(dir string) []string {
	return append(append(ImageBuildEnv("amd64"), "go"), ImageBuildArgs(dir)...)
}

// moveFile puts the spec's file at from at to instead.
func moveFile(s *Spec, from, to string) {
	for i := range s.Files {
		if s.Files[i].Path == from {
			s.Files[i].Path = to
		}
	}
}

func replaceWord(words []string, old, new string) []string {
	out := slices.Clone(words)
	i := slices.Index(out, old)
	if i < 0 {
		panic(fmt.Sprintf("%q is not in %q", old, words))
	}
	out[i] = new
	return out
}

// disagreements lists where img and buildWords (a go build command line)
// differ from the Dockerfile df.
func disagreements(t *testing.T, df Dockerfile, img v1.Image, buildWords []string) []string {
	t.Helper()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	if !slices.Equal(cfg.Config.Entrypoint, df.Entrypoint) {
		out = append(out, fmt.Sprintf("entrypoint: image %q, Dockerfile %q", cfg.Config.Entrypoint, df.Entrypoint))
	}
	if cfg.Config.User != df.User {
		out = append(out, fmt.Sprintf("user: image %q, Dockerfile %q", cfg.Config.User, df.User))
	}
	if cfg.Config.WorkingDir != df.WorkingDir {
		out = append(out, fmt.Sprintf("working dir: image %q, Dockerfile %q", cfg.Config.WorkingDir, df.WorkingDir))
	}
	files, _ := readLayer(t, img)
	for pkg, content := range map[string]string{ManagerPackage: "the manager", FetcherPackage: "the fetcher"} {
		at, copied := df.Binaries[pkg]
		if bin, ok := files[at]; !copied || !ok || string(bin.content) != content || bin.header.Mode&0o111 == 0 {
			out = append(out, fmt.Sprintf("binary: the Dockerfile puts the binary of %s at %q, where the image does not have it executable", pkg, at))
		}
	}
	for pkg, at := range df.Binaries {
		if pkg != ManagerPackage && pkg != FetcherPackage {
			out = append(out, fmt.Sprintf("binary: the Dockerfile puts a binary of %s at %s, which the image does not have", pkg, at))
		}
	}

	build, err := ParseGoBuild(buildWords)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(build.Packages, df.Build.Packages) {
		out = append(out, fmt.Sprintf("go build packages: %q, Dockerfile %q", build.Packages, df.Build.Packages))
	}
	if !maps.Equal(build.Flags, df.Build.Flags) {
		out = append(out, fmt.Sprintf("go build flags: %v, Dockerfile %v", build.Flags, df.Build.Flags))
	}
	if !maps.Equal(build.Env, df.Build.Env) {
		out = append(out, fmt.Sprintf("go build environment: %v, Dockerfile %v", build.Env, df.Build.Env))
	}
	// What the Dockerfile is known to say, so that a parser that lost it
	// on both sides at once does not agree by accident.
	if build.Env["CGO_ENABLED"] != "0" || build.Flags["trimpath"] != "true" || build.Flags["ldflags"] != "-s -w" {
		out = append(out, fmt.Sprintf("the build is not CGO_ENABLED=0 -trimpath -ldflags=-s -w: %+v", build))
	}
	return out
}

func TestParseDockerfile(t *testing.T) {
	const dockerfile = `# syntax=docker/dockerfile:1
ARG GO=1.26
FROM golang:${GO} AS build
ARG OS=linux
WORKDIR /src
RUN go mod download
RUN apt-get update && \
    CGO_ENABLED=0 GOOS=$OS go build \
      -trimpath -ldflags '-s -w' -o /out/app ./cmd/app && ls /out
FROM scratch
workdir /srv
WORKDIR data
COPY --from=build /out/app bin/
COPY LICENSE /
USER 1000:1000
ENTRYPOINT ["/srv/data/bin/app", "serve"]
`
	df, err := ParseDockerfile(strings.NewReader(dockerfile))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(df.Entrypoint, []string{"/srv/data/bin/app", "serve"}) || df.User != "1000:1000" ||
		df.WorkingDir != "/srv/data" || !maps.Equal(df.Binaries, map[string]string{"./cmd/app": "/srv/data/bin/app"}) {
		t.Errorf("parsed %+v", df)
	}
	want := GoBuild{
		Env:      map[string]string{"CGO_ENABLED": "0", "GOOS": "linux"},
		Flags:    map[string]string{"trimpath": "true", "ldflags": "-s -w"},
		Output:   "/out/app",
		Packages: []string{"./cmd/app"},
	}
	if !maps.Equal(df.Build.Env, want.Env) || !maps.Equal(df.Build.Flags, want.Flags) ||
		df.Build.Output != want.Output || !slices.Equal(df.Build.Packages, want.Packages) {
		t.Errorf("build %+v, want %+v", df.Build, want)
	}

	for name, bad := range map[string]string{
		"shell-form entrypoint": strings.Replace(dockerfile, `ENTRYPOINT ["/srv/data/bin/app", "serve"]`, "ENTRYPOINT /srv/data/bin/app serve", 1),
		"no copied binary":      strings.Replace(dockerfile, "COPY --from=build /out/app bin/", "", 1),
		"unknown variable":      strings.Replace(dockerfile, "GOOS=$OS", "GOOS=$TARGETOS", 1),
		"no FROM":               "RUN true\n",
	} {
		if _, err := ParseDockerfile(strings.NewReader(bad)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

// TestParseDockerfileFollowsEachBinaryOfABuild: one go build of several
// packages into a directory, copied one by one or together.
func TestParseDockerfileFollowsEachBinaryOfABuild(t *testing.T) {
	const dockerfile = `FROM golang AS build
WORKDIR /src
RUN go build -o out/ ./cmd/a ./cmd/b ./tools/c
FROM scratch
COPY --from=build /src/out/a /src/out/b /bin/
COPY --from=build /src/out/c /usr/local/bin/tool
ENTRYPOINT ["/bin/a"]
`
	df, err := ParseDockerfile(strings.NewReader(dockerfile))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"./cmd/a": "/bin/a", "./cmd/b": "/bin/b", "./tools/c": "/usr/local/bin/tool"}
	if !maps.Equal(df.Binaries, want) {
		t.Errorf("binaries %v, want %v", df.Binaries, want)
	}

	twoBuilds := strings.Replace(dockerfile, "RUN go build -o out/ ./cmd/a ./cmd/b ./tools/c",
		"RUN go build -o out/ ./cmd/a ./cmd/b\nRUN go build -o out/c ./tools/c", 1)
	if _, err := ParseDockerfile(strings.NewReader(twoBuilds)); err == nil || !strings.Contains(err.Error(), "2 go builds") {
		t.Errorf("binaries of two go builds: %v, want an error saying the image is made from one", err)
	}
}

func TestParseGoBuildNormalizesSpellings(t *testing.T) {
	a, err := ParseGoBuild([]string{"CGO_ENABLED=0", "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", "m", "./cmd/manager"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseGoBuild([]string{"CGO_ENABLED=0", "go", "build", "--trimpath=true", "-ldflags=-s -w", "-o=m", "./cmd/manager"})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(a.Flags, b.Flags) || !maps.Equal(a.Env, b.Env) || a.Output != b.Output || !slices.Equal(a.Packages, b.Packages) {
		t.Errorf("%+v and %+v differ", a, b)
	}
	for _, bad := range [][]string{
		{"go", "run", "."},
		{"go", "build", "-unknownflag", "."},
		{"go", "build", ".", "-trimpath"},
		{"go", "build", "-o"},
		{"nonsense", "go", "build"},
	} {
		if _, err := ParseGoBuild(bad); err == nil {
			t.Errorf("ParseGoBuild(%q) succeeded", bad)
		}
	}
}
