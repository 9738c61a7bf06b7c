package ociimage

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func archImage(t *testing.T, arch string) v1.Image {
	t.Helper()
	spec, err := Operator(fakeBinaries(t, "the manager for "+arch))
	if err != nil {
		t.Fatal(err)
	}
	spec.Arch = arch
	img, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// Each entry of the index names its image's platform, which is what a
// runtime picks by; the image's config says the same.
func TestAnIndexNamesEachImagesPlatform(t *testing.T) {
	amd, arm := archImage(t, "amd64"), archImage(t, "arm64")
	idx, err := Index(amd, arm)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIImageIndex || len(m.Manifests) != 2 {
		t.Fatalf("index %s with %d manifests, want an OCI index of 2", m.MediaType, len(m.Manifests))
	}
	for i, want := range []struct {
		arch string
		img  v1.Image
	}{{"amd64", amd}, {"arm64", arm}} {
		d := m.Manifests[i]
		if d.Platform == nil || d.Platform.OS != "linux" || d.Platform.Architecture != want.arch {
			t.Errorf("entry %d: platform %v, want linux/%s", i, d.Platform, want.arch)
		}
		digest, err := want.img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if d.Digest != digest {
			t.Errorf("entry %d: %s, want the linux/%s image %s", i, d.Digest, want.arch, digest)
		}
		cf, err := want.img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Architecture != want.arch || cf.OS != "linux" {
			t.Errorf("the linux/%s image's config says %s/%s", want.arch, cf.OS, cf.Architecture)
		}
	}
	if _, err := Index(amd, archImage(t, "amd64")); err == nil || !strings.Contains(err.Error(), "two images for linux/amd64") {
		t.Errorf("two amd64 images: %v, want refused", err)
	}
}

// A Spec that names no architecture is amd64's, as every image was before
// there were others.
func TestAnImageWithoutAnArchIsAMD64s(t *testing.T) {
	cf, err := operatorImage(t, fakeBinaries(t, "m")).ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Architecture != "amd64" || cf.OS != "linux" {
		t.Errorf("platform %s/%s, want linux/amd64", cf.OS, cf.Architecture)
	}
}

// The image's architectures are named in three more places: the
// Makefile's PLATFORMS (make docker-buildx), and the CSV's labels, which
// catalogs filter on. They must say what `make image` builds.
func TestEveryPlaceNamesTheImagesArchitectures(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, a := range Arches {
		want = append(want, "linux/"+a)
	}
	m := regexp.MustCompile(`(?m)^PLATFORMS \?= (.*)$`).FindSubmatch(mk)
	if m == nil || string(m[1]) != strings.Join(want, ",") {
		t.Errorf("the Makefile's PLATFORMS: %q, want %q", m, strings.Join(want, ","))
	}
	csv, err := os.ReadFile("../../config/manifests/bases/modelserver-operator.clusterserviceversion.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range regexp.MustCompile(`operatorframework\.io/arch\.(\w+): supported`).FindAllSubmatch(csv, -1) {
		got = append(got, string(l[1]))
	}
	if !slices.Equal(got, Arches) || !strings.Contains(string(csv), "operatorframework.io/os.linux: supported") {
		t.Errorf("the CSV's labels name %v and linux %v; want %v and linux", got, strings.Contains(string(csv), "os.linux"), Arches)
	}
}
