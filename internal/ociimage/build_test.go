package ociimage

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/types"
)

func TestTwoBuildsOfTheSameSpecHaveTheSameDigest(t *testing.T) {
	bins := fakeBinaries(t, "not really a manager")
	first := operatorImage(t, bins)
	// Another second on the clock, and files that were touched, must not
	// show in the image.
	time.Sleep(1100 * time.Millisecond)
	now := time.Now()
	if err := os.Chtimes(filepath.Join(bins, "manager"), now, now); err != nil {
		t.Fatal(err)
	}
	second := operatorImage(t, bins)

	d1, err := first.Digest()
	if err != nil {
		t.Fatal(err)
	}
	d2, err := second.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if d1 != d2 {
		t.Errorf("two builds: %s and %s", d1, d2)
	}

	// The order of the spec's files is not the order of the layer.
	spec, err := Operator(bins)
	if err != nil {
		t.Fatal(err)
	}
	spec.Labels[LabelVersion] = "0.0.0-test"
	slices.Reverse(spec.Files)
	slices.Reverse(spec.Dirs)
	reversed, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	if d3, _ := reversed.Digest(); d3 != d1 {
		t.Errorf("the spec's files in reverse order give %s, not %s", d3, d1)
	}

	// And the content is: another binary is another image.
	other, _ := operatorImage(t, fakeBinaries(t, "another manager")).Digest()
	if other == d1 {
		t.Errorf("another manager binary gives the same digest %s", d1)
	}
}

func TestBuildLocalHoldsWhatBuildHoldsLessCompressed(t *testing.T) {
	spec, err := Operator(fakeBinaries(t, strings.Repeat("a manager that compresses ", 1<<14)))
	if err != nil {
		t.Fatal(err)
	}
	published, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	local, err := BuildLocal(spec)
	if err != nil {
		t.Fatal(err)
	}
	// The diff IDs are the digests of the uncompressed tar.
	pc, _ := published.ConfigFile()
	lc, _ := local.ConfigFile()
	if !slices.Equal(pc.RootFS.DiffIDs, lc.RootFS.DiffIDs) {
		t.Errorf("diff IDs %v (Build) and %v (BuildLocal): the layers hold different files", pc.RootFS.DiffIDs, lc.RootFS.DiffIDs)
	}
	pd, _ := published.Digest()
	ld, _ := local.Digest()
	if pd == ld {
		t.Errorf("Build and BuildLocal gave the same image %s: the level made no difference", pd)
	}
	again, _ := BuildLocal(spec)
	if d, _ := again.Digest(); d != ld {
		t.Errorf("two BuildLocal of one spec: %s and %s", ld, d)
	}
}

func TestTheImageIsOCI(t *testing.T) {
	img := operatorImage(t, fakeBinaries(t, "m"))
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s, want %s", m.MediaType, types.OCIManifestSchema1)
	}
	if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
		t.Errorf("image media type %s, want %s", mt, types.OCIManifestSchema1)
	}
	if m.Config.MediaType != types.OCIConfigJSON {
		t.Errorf("config media type %s, want %s", m.Config.MediaType, types.OCIConfigJSON)
	}
	if len(m.Layers) != 1 || m.Layers[0].MediaType != "application/vnd.oci.image.layer.v1.tar+gzip" {
		t.Errorf("layers %+v, want one application/vnd.oci.image.layer.v1.tar+gzip", m.Layers)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || cfg.Architecture != "amd64" {
		t.Errorf("platform %s/%s, want linux/amd64", cfg.OS, cfg.Architecture)
	}
	if !cfg.Created.Equal(time.Unix(0, 0)) {
		t.Errorf("created %v, want the Unix epoch", cfg.Created)
	}
	if len(cfg.RootFS.DiffIDs) != 1 {
		t.Errorf("rootfs diff IDs %v, want one", cfg.RootFS.DiffIDs)
	}
	want := map[string]string{
		LabelSource:  "https://github.com/modelserver-dev/modelserver-operator",
		LabelTitle:   "modelserver-operator",
		LabelVersion: "0.0.0-test",
	}
	for k, v := range want {
		if cfg.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, cfg.Config.Labels[k], v)
		}
	}
	if !slices.Contains(cfg.Config.Env, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt") ||
		!slices.ContainsFunc(cfg.Config.Env, func(e string) bool { return strings.HasPrefix(e, "PATH=/") }) {
		t.Errorf("env %q lacks PATH or SSL_CERT_FILE", cfg.Config.Env)
	}
}

func TestTheOperatorImagesFiles(t *testing.T) {
	img := operatorImage(t, fakeBinaries(t, "the manager"))
	files, order := readLayer(t, img)

	if !sort.StringsAreSorted(order) {
		t.Errorf("the layer's entries are not sorted: %q", order)
	}
	for p, f := range files {
		if !f.header.ModTime.Equal(time.Unix(0, 0)) {
			t.Errorf("%s has mtime %v, want the Unix epoch", p, f.header.ModTime)
		}
		if f.header.Uname != "" || f.header.Gname != "" {
			t.Errorf("%s has user/group names %q/%q of the build host", p, f.header.Uname, f.header.Gname)
		}
	}

	type want struct {
		dir      bool
		mode     int64
		uid, gid int
	}
	for p, w := range map[string]want{
		"/manager":                           {mode: 0o755},
		"/etc":                               {dir: true, mode: 0o755},
		"/etc/passwd":                        {mode: 0o644},
		"/etc/group":                         {mode: 0o644},
		"/etc/ssl/certs":                     {dir: true, mode: 0o755},
		"/etc/ssl/certs/ca-certificates.crt": {mode: 0o644},
		"/tmp":                               {dir: true, mode: 0o1777},
		"/home":                              {dir: true, mode: 0o755},
		"/home/nonroot":                      {dir: true, mode: 0o700, uid: 65532, gid: 65532},
		"/root":                              {dir: true, mode: 0o700},
	} {
		f, ok := files[p]
		if !ok {
			t.Errorf("%s is not in the layer", p)
			continue
		}
		typ := byte(tar.TypeReg)
		if w.dir {
			typ = tar.TypeDir
		}
		if f.header.Typeflag != typ || f.header.Mode != w.mode || f.header.Uid != w.uid || f.header.Gid != w.gid {
			t.Errorf("%s: type %c mode %#o owner %d:%d, want type %c mode %#o owner %d:%d",
				p, f.header.Typeflag, f.header.Mode, f.header.Uid, f.header.Gid, typ, w.mode, w.uid, w.gid)
		}
	}

	if got := string(files["/manager"].content); got != "the manager" {
		t.Errorf("/manager holds %q, not the binary given", got)
	}
	hostCerts, err := os.ReadFile(CACertsPath)
	if err != nil {
		t.Fatal(err)
	}
	certs := files[CACertsPath].content
	if !bytes.Equal(certs, hostCerts) || !bytes.Contains(certs, []byte("-----BEGIN CERTIFICATE-----")) {
		t.Errorf("%s in the image (%d bytes) is not the host's CA bundle (%d bytes)", CACertsPath, len(certs), len(hostCerts))
	}
	passwd := string(files["/etc/passwd"].content)
	if !strings.Contains(passwd, "\nnonroot:x:65532:65532:") || !strings.HasPrefix(passwd, "root:x:0:0:") {
		t.Errorf("/etc/passwd lacks root or nonroot (65532):\n%s", passwd)
	}
	if group := string(files["/etc/group"].content); !strings.Contains(group, "\nnonroot:x:65532:") {
		t.Errorf("/etc/group lacks nonroot (65532):\n%s", group)
	}
}

func TestOperatorSaysHowToGetMissingCACertificates(t *testing.T) {
	old := hostCACerts
	hostCACerts = "/nonexistent/ca-certificates.crt"
	defer func() { hostCACerts = old }()
	_, err := Operator(fakeBinaries(t, "m"))
	if err == nil || !strings.Contains(err.Error(), "apt-get install ca-certificates") {
		t.Errorf("Operator without CA certificates: %v, want an error saying apt-get install ca-certificates", err)
	}
}

func TestBinaryImage(t *testing.T) {
	bin := filepath.Join(fakeBinaries(t, "a model server"), "manager")
	img, err := Build(Binary(bin, "/usr/bin/tensorflow_model_server", "65532"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{"/usr/bin/tensorflow_model_server"}) || cfg.Config.User != "65532" {
		t.Errorf("entrypoint %q user %q", cfg.Config.Entrypoint, cfg.Config.User)
	}
	if !slices.ContainsFunc(cfg.Config.Env, func(e string) bool {
		return strings.HasPrefix(e, "PATH=") && strings.Contains(e, ":/usr/bin:")
	}) {
		t.Errorf("env %q has no PATH with /usr/bin", cfg.Config.Env)
	}
	files, _ := readLayer(t, img)
	f := files["/usr/bin/tensorflow_model_server"]
	if f.header == nil || f.header.Mode != 0o755 || string(f.content) != "a model server" {
		t.Errorf("/usr/bin/tensorflow_model_server: %+v", f.header)
	}
	if files["/usr"].header == nil || files["/usr/bin"].header == nil {
		t.Errorf("the binary's parent directories are not in the layer")
	}
}

func TestBadSpecsAreRefused(t *testing.T) {
	for name, spec := range map[string]Spec{
		"relative path":      {Files: []File{{Path: "etc/passwd"}}},
		"unclean path":       {Files: []File{{Path: "/etc/../passwd"}}},
		"root":               {Dirs: []Dir{{Path: "/"}}},
		"twice":              {Files: []File{{Path: "/a"}, {Path: "/a"}}},
		"file and dir":       {Files: []File{{Path: "/a"}}, Dirs: []Dir{{Path: "/a"}}},
		"file under a file":  {Files: []File{{Path: "/a"}, {Path: "/a/b"}}},
		"not chmod bits":     {Dirs: []Dir{{Path: "/a", Mode: 0o40755}}},
		"content and host":   {Files: []File{{Path: "/a", HostPath: "/etc/hostname", Content: []byte("x")}}},
		"missing host file":  {Files: []File{{Path: "/a", HostPath: "/nonexistent/file"}}},
		"negative owner IDs": {Files: []File{{Path: "/a", UID: -1}}},
	} {
		if _, err := Build(spec); err == nil {
			t.Errorf("%s: Build succeeded", name)
		}
	}
}
