package ociimage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func startRegistry(t *testing.T) (*Registry, string) {
	t.Helper()
	blobs := filepath.Join(t.TempDir(), "blobs")
	reg, err := StartRegistry("", blobs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := reg.Close(); err != nil {
			t.Errorf("close the registry: %v", err)
		}
	})
	return reg, blobs
}

func TestPushAndPullBack(t *testing.T) {
	reg, blobs := startRegistry(t)
	img := operatorImage(t, fakeBinaries(t, "the manager"))
	ref := reg.Addr() + "/modelserver-operator:0.0.0-test"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := Push(ctx, img, ref); err != nil {
		t.Fatal(err)
	}

	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Image(r, remote.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	got, err := pulled.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("pulled %s, pushed %s", got, want)
	}
	wantCfg, _ := img.ConfigFile()
	gotCfg, err := pulled.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotCfg, wantCfg) {
		t.Errorf("pulled config %+v, pushed %+v", gotCfg, wantCfg)
	}
	if mt, _ := pulled.MediaType(); mt != types.OCIManifestSchema1 {
		t.Errorf("pulled media type %s", mt)
	}
	// The layer came back whole, through the disk blob store.
	files, _ := readLayer(t, pulled)
	if string(files["/manager"].content) != "the manager" {
		t.Errorf("the pulled image's /manager is %q", files["/manager"].content)
	}
	layers, _ := img.Layers()
	ld, _ := layers[0].Digest()
	if _, err := os.Stat(filepath.Join(blobs, ld.Algorithm, ld.Hex)); err != nil {
		t.Errorf("the layer is not in the blob directory: %v", err)
	}

	// A second push of the same image uploads nothing and is the same.
	if err := Push(ctx, img, ref); err != nil {
		t.Errorf("pushing again: %v", err)
	}
}

// TestPrivateRepositoriesAreDownloadedWithCredentialsOnly: an image
// pushed under the private prefix is pulled with the credentials only;
// others stay open.
func TestPrivateRepositoriesAreDownloadedWithCredentialsOnly(t *testing.T) {
	reg, err := StartRegistry("", "", RegistryPrivate("private/", "puller", "s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	img := operatorImage(t, fakeBinaries(t, "the manager"))
	for _, repo := range []string{"private/m:1", "public/m:1"} {
		if err := Push(ctx, img, reg.Addr()+"/"+repo); err != nil {
			t.Fatalf("push %s: %v", repo, err)
		}
	}
	pull := func(repo string, opts ...remote.Option) error {
		r, err := name.ParseReference(reg.Addr()+"/"+repo, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		_, err = remote.Image(r, append(opts, remote.WithContext(ctx))...)
		return err
	}
	var te *transport.Error
	if err := pull("private/m:1"); !errors.As(err, &te) || te.StatusCode != http.StatusUnauthorized {
		t.Errorf("an anonymous pull of the private image: %v, want 401", err)
	}
	if err := pull("private/m:1", remote.WithAuth(&authn.Basic{Username: "puller", Password: "wrong"})); !errors.As(err, &te) || te.StatusCode != http.StatusUnauthorized {
		t.Errorf("a pull with a wrong password: %v, want 401", err)
	}
	if err := pull("private/m:1", remote.WithAuth(&authn.Basic{Username: "puller", Password: "s3cret"})); err != nil {
		t.Errorf("a pull with the credentials: %v", err)
	}
	if err := pull("public/m:1"); err != nil {
		t.Errorf("an anonymous pull of another repository: %v", err)
	}
}

// TestTheRegistryAnswersAsContainerdAsks makes the requests containerd's
// docker resolver and fetcher make to pull by tag over plain HTTP, and
// checks the answers they rely on.
func TestTheRegistryAnswersAsContainerdAsks(t *testing.T) {
	reg, _ := startRegistry(t)
	img := operatorImage(t, fakeBinaries(t, "m"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := Push(ctx, img, reg.Addr()+"/modelserver-operator:0.0.0-test"); err != nil {
		t.Fatal(err)
	}
	digest, _ := img.Digest()
	base := "http://" + reg.Addr() + "/v2/modelserver-operator/"
	accept := strings.Join([]string{
		"application/vnd.docker.distribution.manifest.v2+json",
		"application/vnd.docker.distribution.manifest.list.v2+json",
		"application/vnd.oci.image.manifest.v1+json",
		"application/vnd.oci.image.index.v1+json", "*/*",
	}, ", ")
	do := func(method, url string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", accept)
		req.Header.Set("User-Agent", "containerd/v2.1.0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}

	// Resolve: HEAD of the tag; containerd takes the digest from the
	// header and the size from Content-Length.
	resp, _ := do(http.MethodHead, base+"manifests/0.0.0-test")
	raw, _ := img.RawManifest()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Docker-Content-Digest") != digest.String() ||
		resp.Header.Get("Content-Type") != string(types.OCIManifestSchema1) || resp.ContentLength != int64(len(raw)) {
		t.Fatalf("HEAD of the tag: %s, digest %q, type %q, length %d", resp.Status,
			resp.Header.Get("Docker-Content-Digest"), resp.Header.Get("Content-Type"), resp.ContentLength)
	}
	// Fetch: the manifest by digest, then the config and layer blobs,
	// each checked against its digest.
	resp, body := do(http.MethodGet, base+"manifests/"+digest.String())
	if resp.StatusCode != http.StatusOK || sha256Digest(body) != digest.String() {
		t.Fatalf("GET of the manifest by digest: %s, digest %s", resp.Status, sha256Digest(body))
	}
	var m v1.Manifest
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	for _, desc := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		resp, blob := do(http.MethodGet, base+"blobs/"+desc.Digest.String())
		if resp.StatusCode != http.StatusOK || sha256Digest(blob) != desc.Digest.String() || int64(len(blob)) != desc.Size {
			t.Errorf("GET of blob %s (%s): %s, %d bytes", desc.Digest, desc.MediaType, resp.Status, len(blob))
		}
	}
	resp, _ = do(http.MethodHead, base+"manifests/no-such-tag")
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("HEAD of a missing tag: %s, want 404", resp.Status)
	}
}

func sha256Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func TestPushRefusesRegistriesElsewhere(t *testing.T) {
	img := operatorImage(t, fakeBinaries(t, "m"))
	for _, ref := range []string{
		"modelserver-operator:0.1.0", // Docker Hub
		"ghcr.io/modelserver-dev/modelserver-operator:0.1.0",
		"10.0.0.5:5000/modelserver-operator:0.1.0",
		"192.168.1.10:5000/modelserver-operator:0.1.0",
		"198.20.0.1:5000/modelserver-operator:0.1.0",
		"localhost.example.com:5000/modelserver-operator:0.1.0",
	} {
		err := Push(context.Background(), img, ref)
		if err == nil || !strings.Contains(err.Error(), "refusing to push") {
			t.Errorf("Push to %s: %v, want a refusal", ref, err)
		}
	}
}

func TestPushSaysWhenNoRegistryListens(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	err = Push(context.Background(), operatorImage(t, fakeBinaries(t, "m")), addr+"/modelserver-operator:x")
	if !errors.Is(err, ErrNoRegistry) || !strings.Contains(err.Error(), addr) {
		t.Errorf("Push with nothing on %s: %v, want ErrNoRegistry naming the address", addr, err)
	}
}

func TestLocalHosts(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LOCALHOST": true, "127.0.0.1": true, "127.1.2.3": true, "::1": true,
		"::ffff:127.0.0.1": true, "198.18.0.1": true, "198.19.255.254": true,
		"198.17.255.255": false, "198.20.0.0": false, "10.0.0.1": false, "0.0.0.0": false,
		"::": false, "": false, "example.com": false, "localhost.localdomain": false,
	} {
		if got := IsLocalHost(host); got != want {
			t.Errorf("IsLocalHost(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestStartRegistryRefusesAddressesElsewhere(t *testing.T) {
	for _, addr := range []string{":5000", "0.0.0.0:0", "[::]:0", "10.1.2.3:5000", "example.com:5000", "127.0.0.1"} {
		if reg, err := StartRegistry(addr, ""); err == nil {
			_ = reg.Close()
			t.Errorf("StartRegistry(%q) started", addr)
		}
	}
}

func TestWriteLayout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "layout")
	first := operatorImage(t, fakeBinaries(t, "first"))
	second := operatorImage(t, fakeBinaries(t, "second"))
	for _, img := range []v1.Image{first, second} {
		if err := WriteLayout(dir, img, "modelserver-operator:test"); err != nil {
			t.Fatal(err)
		}
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := second.Digest()
	if len(im.Manifests) != 1 || im.Manifests[0].Digest != want ||
		im.Manifests[0].Annotations[refNameAnnotation] != "modelserver-operator:test" {
		t.Fatalf("index.json holds %+v, want only %s named modelserver-operator:test", im.Manifests, want)
	}
	got, err := p.Image(want)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := got.Digest(); d != want {
		t.Errorf("read back %s from the layout, want %s", d, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
		t.Error(err)
	}
}
