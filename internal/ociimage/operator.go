package ociimage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/modelserver-dev/modelserver-operator/internal/fetchcontract"
)

// The OCI annotation keys the operator image is labelled with.
const (
	LabelSource  = "org.opencontainers.image.source"
	LabelTitle   = "org.opencontainers.image.title"
	LabelVersion = "org.opencontainers.image.version"
)

const (
	// OperatorBinary is where the manager is in the image: the Dockerfile
	// copies it to WORKDIR / (TestTheImageAndTheDockerfileAgree holds the
	// two together).
	OperatorBinary = "/manager"
	// FetcherBinary is where the fetcher is, beside the manager: the
	// command the fetch Jobs and serving pods name.
	FetcherBinary = fetchcontract.FetcherCommand
	// OperatorUser is the Dockerfile's USER: distroless's nonroot.
	OperatorUser = "65532:65532"
	// CACertsPath is where the image's CA bundle is, and where the host's
	// is taken from: Debian's (and distroless's) place.
	CACertsPath = "/etc/ssl/certs/ca-certificates.crt"

	operatorSource = "https://github.com/modelserver-dev/modelserver-operator"
	operatorTitle  = "modelserver-operator"
	nonrootID      = 65532
)

// DefaultPathEnv is distroless's PATH, as an image's environment entry. A
// static image has nothing on it, but a runtime resolves a command that is
// not a path through it.
const DefaultPathEnv = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// hostCACerts is read into the operator image; a variable so that a test
// can point it elsewhere.
var hostCACerts = CACertsPath

// Distroless's account files: runc and the kubelet look the image's user up
// in them, and Go's os/user does for a name.
const (
	etcPasswd = `root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
`
	etcGroup = `root:x:0:
nobody:x:65534:
nonroot:x:65532:
`
)

// baseFiles and baseDirs are what the operator's and the single-binary
// images take from gcr.io/distroless/static:nonroot, less what nothing
// here uses (tzdata, os-release, licenses).
func baseFiles() []File {
	return []File{
		{Path: "/etc/passwd", Mode: 0o644, Content: []byte(etcPasswd)},
		{Path: "/etc/group", Mode: 0o644, Content: []byte(etcGroup)},
	}
}

func baseDirs() []Dir {
	return []Dir{
		{Path: "/tmp", Mode: 0o1777},
		{Path: "/root", Mode: 0o700},
		{Path: "/home/nonroot", Mode: 0o700, UID: nonrootID, GID: nonrootID},
	}
}

// Operator is the image the repository's Dockerfile describes, with the
// binaries that ImageBuildArgs builds into binDir (static linux builds)
// as its /manager and /fetcher. The caller sets Arch if they are not
// amd64's, and adds the LabelVersion label: only it knows the version it
// builds.
func Operator(binDir string) (Spec, error) {
	manager, fetcher := filepath.Join(binDir, path.Base(ManagerPackage)), filepath.Join(binDir, path.Base(FetcherPackage))
	for _, bin := range []string{manager, fetcher} {
		if _, err := os.Stat(bin); err != nil {
			return Spec{}, fmt.Errorf("a binary for the image: %w", err)
		}
	}
	if _, err := os.Stat(hostCACerts); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Spec{}, fmt.Errorf("the image needs this machine's CA certificates at %s, which is missing: apt-get install ca-certificates", hostCACerts)
		}
		return Spec{}, fmt.Errorf("the CA certificates for the image: %w", err)
	}
	files := append(baseFiles(),
		File{Path: OperatorBinary, Mode: 0o755, HostPath: manager},
		File{Path: FetcherBinary, Mode: 0o755, HostPath: fetcher},
		File{Path: CACertsPath, Mode: 0o644, HostPath: hostCACerts},
	)
	return Spec{
		Files:      files,
		Dirs:       baseDirs(),
		Entrypoint: []string{OperatorBinary},
		User:       OperatorUser,
		Env:        []string{DefaultPathEnv, "SSL_CERT_FILE=" + CACertsPath},
		WorkingDir: "/",
		Labels: map[string]string{
			LabelSource: operatorSource,
			LabelTitle:  operatorTitle,
		},
	}, nil
}

// Binary is an image of one static binary at inImage, its entrypoint,
// run as user ("uid[:gid]", or root, nobody or nonroot). It has PATH set,
// because a pod that names its command without a path (e.g.
// tensorflow_model_server) is resolved through the image's PATH, and /tmp.
func Binary(hostPath, inImage, user string) Spec {
	return Spec{
		Files:      append(baseFiles(), File{Path: inImage, Mode: 0o755, HostPath: hostPath}),
		Dirs:       baseDirs(),
		Entrypoint: []string{inImage},
		User:       user,
		Env:        []string{DefaultPathEnv},
		WorkingDir: "/",
	}
}
