package fetch

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/zstd"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// testRegistry is an in-process OCI registry on loopback, which the
// fetch reaches over plain HTTP as it would any registry on 127.0.0.1.
type testRegistry struct {
	host  string
	blobs atomic.Int64 // blob downloads
	// auth, when set, is the user:password every request must carry.
	auth string
	// fault, when set, answers a blob download in place of the registry
	// when it returns true.
	fault atomic.Pointer[func(w http.ResponseWriter, r *http.Request) bool]
	// streamRate, when set, caps each blob download at that many bytes a
	// second, as a registry behind a CDN caps a connection.
	streamRate atomic.Int64
	// ranges counts the blob downloads that asked for a range; inFlight
	// the blob downloads running, and mostInFlight the most at once.
	ranges, inFlight, mostInFlight atomic.Int64
}

// paced writes at most rate bytes a second.
type paced struct {
	http.ResponseWriter
	rate  int64
	start time.Time
	sent  int64
}

// Write sends b 32 KiB at a time: the registry hands a whole blob to one
// Write, which would otherwise arrive at once and wait after.
func (p *paced) Write(b []byte) (int, error) {
	sent := 0
	for len(b) > 0 {
		n, err := p.ResponseWriter.Write(b[:min(len(b), 32<<10)])
		sent += n
		p.sent += int64(n)
		if err != nil {
			return sent, err
		}
		b = b[n:]
		if ahead := time.Duration(p.sent*int64(time.Second)/p.rate) - time.Since(p.start); ahead > 0 {
			time.Sleep(ahead)
		}
	}
	return sent, nil
}

func newTestRegistry(t testing.TB, auth string) *testRegistry {
	t.Helper()
	r := &testRegistry{auth: auth}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if u, p, ok := req.BasicAuth(); r.auth != "" && (!ok || u+":"+p != r.auth) {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/sha256:") {
			r.blobs.Add(1)
			if req.Header.Get("Range") != "" {
				r.ranges.Add(1)
			}
			n := r.inFlight.Add(1)
			defer r.inFlight.Add(-1)
			for most := r.mostInFlight.Load(); n > most && !r.mostInFlight.CompareAndSwap(most, n); most = r.mostInFlight.Load() {
			}
			if f := r.fault.Load(); f != nil && (*f)(w, req) {
				return
			}
			if rate := r.streamRate.Load(); rate > 0 {
				w = &paced{ResponseWriter: w, rate: rate, start: time.Now()}
			}
		}
		inner.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.host = strings.TrimPrefix(srv.URL, "http://")
	return r
}

// push writes img as repo:tag and returns its oci:// URI.
func (r *testRegistry) push(t testing.TB, repoTag string, img v1.Image) string {
	t.Helper()
	ref, err := name.ParseReference(r.host + "/" + repoTag)
	if err != nil {
		t.Fatal(err)
	}
	opts := []remote.Option{}
	if u, p, ok := strings.Cut(r.auth, ":"); ok {
		opts = append(opts, remote.WithAuth(&authn.Basic{Username: u, Password: p}))
	}
	if err := remote.Write(ref, img, opts...); err != nil {
		t.Fatal(err)
	}
	return "oci://" + r.host + "/" + repoTag
}

// pushIndex writes idx as repo:tag and returns its oci:// URI.
func (r *testRegistry) pushIndex(t testing.TB, repoTag string, idx v1.ImageIndex) string {
	t.Helper()
	ref, err := name.ParseReference(r.host + "/" + repoTag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatal(err)
	}
	return "oci://" + r.host + "/" + repoTag
}

// imageIndex is an index of an image for each architecture.
func imageIndex(byArch map[string]v1.Image) v1.ImageIndex {
	idx := v1.ImageIndex(empty.Index)
	for arch, img := range byArch {
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	return idx
}

// imageOf is an image of layers, each a gzipped tar of its entries.
func imageOf(t testing.TB, layers ...[]archiveEntry) v1.Image {
	t.Helper()
	img := empty.Image
	for _, es := range layers {
		var err error
		img, err = mutate.AppendLayers(img, static.NewLayer(tarball(t, true, es), types.OCILayer))
		if err != nil {
			t.Fatal(err)
		}
	}
	return img
}

// baseImageFiles stand for a base image's files outside /models: a
// modelcar is often built FROM busybox, whose links the fetch must leave.
var baseImageFiles = []archiveEntry{
	{name: "bin/", typ: tar.TypeDir},
	{name: "bin/sh", typ: tar.TypeSymlink, link: "busybox"},
	{name: "bin/busybox", body: []byte("\x7fELF")},
}

func TestAModelImageIsPulledFromItsModelsDirectoryWithItsLayersApplied(t *testing.T) {
	reg := newTestRegistry(t, "")
	v1Files, v2Files, v3Files := model(1), model(2), model(3)
	v1Files["1/saved_model.pb"] = []byte("the first graph")
	img := imageOf(t,
		baseImageFiles,
		append([]archiveEntry{{name: "/models/", typ: tar.TypeDir}}, entries(prefixed("/models/", merge(v1Files, v2Files)))...),
		// The next layer replaces a file, removes version 2 and adds 3.
		append([]archiveEntry{
			{name: "models/1/saved_model.pb", body: []byte("graph of version 1")},
			{name: "./models/.wh.2", body: nil},
		}, entries(prefixed("models/", v3Files))...),
	)
	uri := reg.push(t, "team/half-plus-two:v1", img)
	o, logs := testOptions(t, uri, "")
	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	want := merge(model(1), v3Files)
	assertTree(t, o.Dest, want)
	if len(sum.Versions) != 2 || sum.Versions[0] != 1 || sum.Versions[1] != 3 {
		t.Errorf("versions %v; want [1 3]", sum.Versions)
	}
	digest, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if want := reg.host + "/team/half-plus-two@" + digest.String(); sum.Image != want {
		t.Errorf("the summary's image %q, want %q", sum.Image, want)
	}
	blobs := reg.blobs.Load()

	// The tag still names the same manifest: nothing is downloaded, and
	// the summary is the same.
	if again, err := Run(context.Background(), o); err != nil || again.Image != sum.Image {
		t.Fatalf("a second run: %+v, %v; want %+v", again, err, sum)
	}
	if n := reg.blobs.Load(); n != blobs {
		t.Errorf("a second run downloaded %d blobs; want none", n-blobs)
	}
	// The tag moves: the new model is pulled.
	reg.push(t, "team/half-plus-two:v1", imageOf(t, entries(prefixed("models/", model(7)))))
	if sum, err := Run(context.Background(), o); err != nil || len(sum.Versions) != 1 || sum.Versions[0] != 7 {
		t.Fatalf("after the tag moved: %+v, %v; want version 7", sum, err)
	}
	assertTree(t, o.Dest, model(7))
}

func TestAnOpaqueWhiteoutEmptiesTheModelOfLowerLayers(t *testing.T) {
	reg := newTestRegistry(t, "")
	uri := reg.push(t, "m:v1", imageOf(t,
		entries(prefixed("models/", model(1, 2))),
		append([]archiveEntry{{name: "models/.wh..wh..opq"}}, entries(prefixed("models/", model(5)))...),
	))
	o, _ := testOptions(t, uri, "")
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	assertTree(t, o.Dest, model(5))
}

func TestZstdAndUncompressedLayersAreRead(t *testing.T) {
	reg := newTestRegistry(t, "")
	var zbuf bytes.Buffer
	zw, err := zstd.NewWriter(&zbuf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(tarball(t, false, entries(prefixed("models/", model(1))))); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image,
		static.NewLayer(zbuf.Bytes(), types.OCILayerZStd),
		static.NewLayer(tarball(t, false, entries(prefixed("models/", model(2)))), types.OCIUncompressedLayer))
	if err != nil {
		t.Fatal(err)
	}
	o, logs := testOptions(t, reg.push(t, "zstd:v1", img), "")
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	assertTree(t, o.Dest, model(1, 2))
}

func TestAnOrasArtifactsFilesAndDirectoriesAreTheModel(t *testing.T) {
	reg := newTestRegistry(t, "")
	files := model(1, 2)
	// oras push reg/m:v1 resnet/ gives the directory as one titled tar.gz;
	// oras push reg/m:v1 1/saved_model.pb ... gives a layer per file.
	dir := static.NewLayer(tarball(t, true, append([]archiveEntry{{name: "resnet/", typ: tar.TypeDir}}, entries(prefixed("resnet/", model(1)))...)), "application/vnd.oci.image.layer.v1.tar+gzip")
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
		Layer:       dir,
		Annotations: map[string]string{annotationTitle: "resnet", annotationUnpack: "true"},
	})
	if err != nil {
		t.Fatal(err)
	}
	img = mutate.ConfigMediaType(img, types.OCIEmptyJSON)
	dirURI := reg.push(t, "dir:v1", img)

	perFile := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	for _, n := range keys(model(2)) {
		perFile, err = mutate.Append(perFile, mutate.Addendum{
			Layer:       static.NewLayer(files[n], "application/octet-stream"),
			Annotations: map[string]string{annotationTitle: n},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	filesURI := reg.push(t, "files:v1", perFile)

	for uri, want := range map[string]map[string][]byte{dirURI: model(1), filesURI: model(2)} {
		o, logs := testOptions(t, uri, "")
		if _, err := Run(context.Background(), o); err != nil {
			t.Fatalf("%s: %v\n%s", uri, err, logs)
		}
		assertTree(t, o.Dest, want)
	}
}

func TestRegistryCredentialsComeFromADockerConfigAndAreNeverShown(t *testing.T) {
	const password = "pa55word-do-not-print-7"
	reg := newTestRegistry(t, "puller:"+password)
	uri := reg.push(t, "private/m:v1", imageOf(t, entries(prefixed("models/", model(1)))))

	o, _ := testOptions(t, uri, "")
	fe := wantFailure(t, mustFail(Run(context.Background(), o)), servingv1alpha1.ReasonAccessDenied, ExitPermanent)
	if !strings.Contains(fe.Message, KeyDockerConfigJSON) {
		t.Errorf("message %q does not name %s", fe.Message, KeyDockerConfigJSON)
	}

	// The Secret kubectl create secret docker-registry makes.
	auth := base64.StdEncoding.EncodeToString([]byte("puller:" + password))
	cfg, _ := json.Marshal(map[string]any{"auths": map[string]any{"http://" + reg.host + "/v2/": map[string]string{"auth": auth}}})
	o, logs := testOptions(t, uri, secretDir(t, map[string]string{KeyDockerConfigJSON: string(cfg)}))
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	assertTree(t, o.Dest, model(1))

	// Refused credentials: the message names the key, and shows neither.
	bad := base64.StdEncoding.EncodeToString([]byte("puller:wrong-" + password))
	cfg, _ = json.Marshal(map[string]any{"auths": map[string]any{reg.host: map[string]string{"auth": bad, "password": "wrong-" + password}}})
	o, logs = testOptions(t, uri, secretDir(t, map[string]string{KeyDockerConfigJSON: string(cfg)}))
	fe = wantFailure(t, mustFail(Run(context.Background(), o)), servingv1alpha1.ReasonAccessDenied, ExitPermanent)
	for _, secret := range []string{password, bad} {
		if strings.Contains(fe.Message, secret) || strings.Contains(logs.String(), secret) {
			t.Errorf("a credential is shown: %s\n%s", fe.Message, logs)
		}
	}
}

func TestOCIFailuresSayWhatIsWrong(t *testing.T) {
	reg := newTestRegistry(t, "")
	noModels := reg.push(t, "plain:v1", imageOf(t, baseImageFiles))
	link := reg.push(t, "link:v1", imageOf(t, []archiveEntry{{name: "models/1/saved_model.pb", typ: tar.TypeSymlink, link: "/etc/passwd"}}))
	for _, c := range []struct {
		uri, reason, message string
	}{
		{"oci://" + reg.host + "/absent:v1", servingv1alpha1.ReasonNotFound, "NAME_UNKNOWN"},
		{noModels, servingv1alpha1.ReasonInvalidLayout, "is an image without a /models directory"},
		{link, servingv1alpha1.ReasonInvalidLayout, "is a link"},
		{"oci://" + reg.host + "/plain@sha256:" + strings.Repeat("0", 64), servingv1alpha1.ReasonNotFound, "MANIFEST_UNKNOWN"},
	} {
		o, _ := testOptions(t, c.uri, "")
		fe := wantFailure(t, mustFail(Run(context.Background(), o)), c.reason, ExitPermanent)
		if !strings.Contains(fe.Message, c.message) {
			t.Errorf("%s: message %q; want it to say %q", c.uri, fe.Message, c.message)
		}
		assertNothingPublished(t, o.Dest)
	}
}

// TestAStalledOrCorruptLayerIsPulledAgain: a layer download on which
// nothing arrives for the stall timeout, or whose bytes do not match its
// digest, is retried; a registry that keeps serving corrupt bytes fails
// the fetch, and nothing is published.
func TestAStalledOrCorruptLayerIsPulledAgain(t *testing.T) {
	reg := newTestRegistry(t, "")
	uri := reg.push(t, "m:v1", imageOf(t, entries(prefixed("models/", model(1, 2)))))
	faults := atomic.Int64{}
	once := func(w http.ResponseWriter, r *http.Request) bool {
		if faults.Add(1) > 1 {
			return false
		}
		w.Header().Set("Content-Length", "100000")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte{0x1f, 0x8b})
		w.(http.Flusher).Flush()
		<-r.Context().Done() // nothing more: a stall
		return true
	}
	reg.fault.Store(&once)
	o, logs := testOptions(t, uri, "")
	o.StallTimeout = 200 * time.Millisecond
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	assertTree(t, o.Dest, model(1, 2))
	if !strings.Contains(logs.String(), "no data received for 200ms") {
		t.Errorf("the stall is not in the log:\n%s", logs)
	}

	// Damaged on its way: the bytes do not unpack, and their digest
	// tells that they are not the layer's.
	faults.Store(0)
	damaged := func(w http.ResponseWriter, _ *http.Request) bool {
		if faults.Add(1) > 1 {
			return false
		}
		body := []byte("\x1f\x8b this is no gzip stream")
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		_, _ = w.Write(body)
		return true
	}
	reg.fault.Store(&damaged)
	o, logs = testOptions(t, uri, "")
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatalf("a layer damaged once: %v\n%s", err, logs)
	}
	assertTree(t, o.Dest, model(1, 2))

	corrupt := func(w http.ResponseWriter, _ *http.Request) bool {
		body := tarball(t, true, entries(prefixed("models/", model(3))))
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		_, _ = w.Write(body)
		return true
	}
	reg.fault.Store(&corrupt)
	before := reg.blobs.Load()
	o, _ = testOptions(t, uri, "")
	fe := wantFailure(t, mustFail(Run(context.Background(), o)), servingv1alpha1.ReasonFetchFailed, ExitTransient)
	if !strings.Contains(fe.Message, "sha256") {
		t.Errorf("message %q does not say the digest differs", fe.Message)
	}
	if n := reg.blobs.Load() - before; n != int64(o.Retry.Attempts) {
		t.Errorf("%d downloads of the corrupt layer, want %d (every attempt)", n, o.Retry.Attempts)
	}
	assertNothingPublished(t, o.Dest)
}

// TestARegistryInPlainHTTPIsReachedOnlyWhenTheSecretSaysSo: a registry
// whose name is not loopback's is asked for HTTPS; one that answers in
// plain text fails the fetch, naming the key that allows it, and with it
// is pulled from. 127.0.0.2 is loopback, but not by the name image tools
// treat as such.
func TestARegistryInPlainHTTPIsReachedOnlyWhenTheSecretSaysSo(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 here: %v", err)
	}
	srv := httptest.NewUnstartedServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	_ = srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	host := ln.Addr().String()
	ref, err := name.ParseReference(host+"/m:v1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, imageOf(t, entries(prefixed("models/", model(1))))); err != nil {
		t.Fatal(err)
	}
	uri := "oci://" + host + "/m:v1"

	o, _ := testOptions(t, uri, "")
	fe := wantFailure(t, mustFail(Run(context.Background(), o)), servingv1alpha1.ReasonFetchFailed, ExitPermanent)
	if !strings.Contains(fe.Message, "plain HTTP") || !strings.Contains(fe.Message, KeyPlainHTTP) {
		t.Errorf("message %q: want it to say the registry answers plain HTTP, and name %s", fe.Message, KeyPlainHTTP)
	}
	o, logs := testOptions(t, uri, secretDir(t, map[string]string{KeyPlainHTTP: "true"}))
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	assertTree(t, o.Dest, model(1))
}

// TestAnIndexGivesTheNodesPlatform: a model image built for several
// platforms is an index; the node's image is pulled, and an index without
// one fails at once, naming the platform.
func TestAnIndexGivesTheNodesPlatform(t *testing.T) {
	reg := newTestRegistry(t, "")
	index := imageIndex
	pushIndex := func(repoTag string, idx v1.ImageIndex) string { return reg.pushIndex(t, repoTag, idx) }
	other := "s390x"
	if runtime.GOARCH == other {
		other = "ppc64le"
	}
	both := pushIndex("multi:v1", index(map[string]v1.Image{
		runtime.GOARCH: imageOf(t, entries(prefixed("models/", model(1)))),
		other:          imageOf(t, entries(prefixed("models/", model(2)))),
	}))
	o, logs := testOptions(t, both, "")
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	assertTree(t, o.Dest, model(1))

	elsewhere := pushIndex("foreign:v1", index(map[string]v1.Image{other: imageOf(t, entries(prefixed("models/", model(2))))}))
	o, _ = testOptions(t, elsewhere, "")
	fe := wantFailure(t, mustFail(Run(context.Background(), o)), servingv1alpha1.ReasonInvalidLayout, ExitPermanent)
	if !strings.Contains(fe.Message, "without an image for linux/"+runtime.GOARCH) {
		t.Errorf("message %q does not name the node's platform", fe.Message)
	}
}

func TestCredentialKeysForOCI(t *testing.T) {
	if msg := CheckCredentialKeys("oci://r.example/m:v1", false, []string{KeyDockerConfigJSON}); msg != "" {
		t.Errorf("a docker-registry Secret: %q", msg)
	}
	if msg := CheckCredentialKeys("oci://r.example/m:v1", false, []string{"AWS_ACCESS_KEY_ID"}); !strings.Contains(msg, KeyDockerConfigJSON) {
		t.Errorf("an S3 Secret for an oci:// model: %q; want the keys read named", msg)
	}
}

func mustFail(_ Summary, err error) error { return err }

func merge(ms ...map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// pullSecretVolume lays out image pull secrets as the fetch Job's
// projected volume does: a directory per Secret, behind ..data; a Secret
// missing has none.
func pullSecretVolume(t testing.TB, secrets map[string]map[string]string, names ...string) []PullSecret {
	t.Helper()
	dir := t.TempDir()
	data := filepath.Join(dir, "..2026_01_01_00_00_00.000000001")
	for name, keys := range secrets {
		if err := os.MkdirAll(filepath.Join(data, name), 0o755); err != nil {
			t.Fatal(err)
		}
		for k, v := range keys {
			if err := os.WriteFile(filepath.Join(data, name, k), []byte(v), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink(filepath.Join(filepath.Base(data), name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	out := make([]PullSecret, 0, len(names))
	for _, n := range names {
		out = append(out, PullSecret{Name: n, Dir: filepath.Join(dir, n)})
	}
	return out
}

func dockerConfigJSON(host, userPassword string) string {
	cfg, _ := json.Marshal(map[string]any{"auths": map[string]any{host: map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(userPassword))}}})
	return string(cfg)
}

// The serving pods' image pull secrets give an oci:// model's registry
// its credentials when the credentials Secret has none for it, in either
// form (.dockerconfigjson, .dockercfg); one missing is skipped, as the
// kubelet skips it, and named if the registry then refuses.
func TestImagePullSecretsGiveTheModelsRegistryItsCredentials(t *testing.T) {
	const password = "pull-pa55word-never-shown"
	reg := newTestRegistry(t, "puller:"+password)
	uri := reg.push(t, "private/m:v1", imageOf(t, entries(prefixed("models/", model(1)))))
	legacy, _ := json.Marshal(map[string]any{reg.host: map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte("puller:" + password))}})
	secrets := map[string]map[string]string{
		"elsewhere": {KeyDockerConfigJSON: dockerConfigJSON("registry.example.com", "someone:else")},
		"current":   {KeyDockerConfigJSON: dockerConfigJSON(reg.host, "puller:"+password)},
		"legacy":    {KeyDockerCfg: string(legacy)},
		"wrong":     {KeyDockerConfigJSON: dockerConfigJSON(reg.host, "puller:wrong-"+password)},
	}

	for _, tc := range []struct {
		name  string
		pulls []string
	}{
		{"a .dockerconfigjson after one missing and one for another registry", []string{"missing", "elsewhere", "current"}},
		{"a .dockercfg", []string{"legacy"}},
		{"the first naming the registry", []string{"current", "wrong"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, logs := testOptions(t, uri, "")
			o.PullSecrets = pullSecretVolume(t, secrets, tc.pulls...)
			if _, err := Run(context.Background(), o); err != nil {
				t.Fatalf("%v\n%s", err, logs)
			}
			assertTree(t, o.Dest, model(1))
			if slices.Contains(tc.pulls, "missing") && !strings.Contains(logs.String(), `"secret":"missing"`) {
				t.Errorf("the missing pull secret is not logged:\n%s", logs)
			}
		})
	}

	// The credentials Secret's entry for the registry comes first: its
	// refusal names it.
	o, _ := testOptions(t, uri, secretDir(t, map[string]string{KeyDockerConfigJSON: dockerConfigJSON(reg.host, "puller:wrong-"+password)}))
	o.PullSecrets = pullSecretVolume(t, secrets, "current")
	fe := wantFailure(t, mustFail(Run(context.Background(), o)), servingv1alpha1.ReasonAccessDenied, ExitPermanent)
	if !strings.Contains(fe.Message, "the registry refused the credentials for "+reg.host+" in the credentials Secret's .dockerconfigjson") {
		t.Errorf("message %q: want it to say whose credentials were refused", fe.Message)
	}

	// A pull secret's refused credentials are named by the Secret, and
	// shown nowhere.
	o, logs := testOptions(t, uri, "")
	o.PullSecrets = pullSecretVolume(t, secrets, "wrong")
	fe = wantFailure(t, mustFail(Run(context.Background(), o)), servingv1alpha1.ReasonAccessDenied, ExitPermanent)
	if !strings.Contains(fe.Message, `in image pull secret "wrong"`) {
		t.Errorf("message %q: want it to name the image pull secret", fe.Message)
	}
	wrongAuth := base64.StdEncoding.EncodeToString([]byte("puller:wrong-" + password))
	for _, secret := range []string{password, wrongAuth} {
		if strings.Contains(fe.Message, secret) || strings.Contains(logs.String(), secret) {
			t.Errorf("a credential is shown: %s\n%s", fe.Message, logs)
		}
	}

	// None for the registry: the message says where they would be read,
	// and which pull secrets were not there.
	o, _ = testOptions(t, uri, "")
	o.PullSecrets = pullSecretVolume(t, secrets, "missing", "elsewhere")
	fe = wantFailure(t, mustFail(Run(context.Background(), o)), servingv1alpha1.ReasonAccessDenied, ExitPermanent)
	for _, want := range []string{"no credentials for " + reg.host, "spec.podTemplate.imagePullSecrets", "without .dockerconfigjson or .dockercfg: missing"} {
		if !strings.Contains(fe.Message, want) {
			t.Errorf("message %q: want %q in it", fe.Message, want)
		}
	}

	// A pull secret that is not a docker config fails at once, its value
	// unshown.
	o, _ = testOptions(t, uri, "")
	o.PullSecrets = pullSecretVolume(t, map[string]map[string]string{"broken": {KeyDockerConfigJSON: "not-json " + password}}, "broken")
	fe = wantFailure(t, mustFail(Run(context.Background(), o)), servingv1alpha1.ReasonFetchFailed, ExitPermanent)
	if !strings.Contains(fe.Message, `image pull secret "broken"`) || strings.Contains(fe.Message, password) {
		t.Errorf("message %q: want it to name the Secret, not show its value", fe.Message)
	}
}

// filesArtifact is an oras artifact of one layer per file, titled by its
// path.
func filesArtifact(t testing.TB, files map[string][]byte) v1.Image {
	t.Helper()
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	for _, n := range slices.Sorted(maps.Keys(files)) {
		var err error
		img, err = mutate.Append(img, mutate.Addendum{
			Layer:       static.NewLayer(files[n], "application/octet-stream"),
			Annotations: map[string]string{annotationTitle: n},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return mutate.ConfigMediaType(img, types.OCIEmptyJSON)
}

// TestAnArtifactsFilesArePulledAtOnce: the files of an artifact are
// pulled ociLayersAtOnce at a time, not one after another; one that
// fails ends the fetch with its own failure, and nothing is published.
func TestAnArtifactsFilesArePulledAtOnce(t *testing.T) {
	reg := newTestRegistry(t, "")
	files := model(1, 2, 3) // 12 files
	uri := reg.push(t, "files:v1", filesArtifact(t, files))

	var inFlight, most atomic.Int64
	overlap := func(http.ResponseWriter, *http.Request) bool {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(20 * time.Millisecond) // long enough for the others to start
		return false
	}
	reg.fault.Store(&overlap)
	o, logs := testOptions(t, uri, "")
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	assertTree(t, o.Dest, files)
	if n := most.Load(); n < 2 || n > ociLayersAtOnce {
		t.Errorf("at most %d files were pulled at once, want 2 to %d", n, ociLayersAtOnce)
	}

	var served atomic.Int64
	missing := func(w http.ResponseWriter, _ *http.Request) bool {
		if served.Add(1) != 5 {
			return false
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"errors":[{"code":"BLOB_UNKNOWN","message":"blob unknown to registry"}]}`)
		return true
	}
	reg.fault.Store(&missing)
	o, _ = testOptions(t, uri, "")
	fe := wantFailure(t, mustFail(Run(context.Background(), o)), servingv1alpha1.ReasonNotFound, ExitPermanent)
	if !strings.Contains(fe.Message, "BLOB_UNKNOWN") || !strings.Contains(fe.Message, "layer ") {
		t.Errorf("message %q: want the layer and the registry's word", fe.Message)
	}
	assertNothingPublished(t, o.Dest)
}

// Pulled at once only when no two layers write the same path; others are
// applied one by one, in order.
func TestFilesApart(t *testing.T) {
	file := func(title string) v1.Descriptor {
		return v1.Descriptor{Annotations: map[string]string{annotationTitle: title}}
	}
	dir := v1.Descriptor{Annotations: map[string]string{annotationTitle: "resnet", annotationUnpack: "true"}}
	for _, tc := range []struct {
		name   string
		layers []v1.Descriptor
		want   bool
	}{
		{"files of their own", []v1.Descriptor{file("1/saved_model.pb"), file("1/variables/variables.index"), file("./2/saved_model.pb")}, true},
		{"the same path twice", []v1.Descriptor{file("1/saved_model.pb"), file("1//saved_model.pb")}, false},
		{"a file inside another's path", []v1.Descriptor{file("1"), file("1/saved_model.pb")}, false},
		{"a directory to unpack", []v1.Descriptor{file("1/saved_model.pb"), dir}, false},
		{"a path out of the model", []v1.Descriptor{file("../1/saved_model.pb")}, false},
	} {
		if got := filesApart(tc.layers); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
