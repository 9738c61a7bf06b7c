package fetch

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/imagesig"
	"github.com/modelserver-dev/modelserver-operator/internal/imagesig/sigtest"
)

// pushedDigest is the digest reference of what repoTag names.
func pushedDigest(t *testing.T, reg *testRegistry, repoTag string) name.Digest {
	t.Helper()
	ref, err := name.ParseReference(reg.host + "/" + repoTag)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Head(ref)
	if err != nil {
		t.Fatal(err)
	}
	return ref.Context().Digest(desc.Digest.String())
}

// TestAModelImageIsPulledOnlyWhenSignedByAKeyOfTheSpec: an image signed
// with one of the keys, in either of cosign's forms, is pulled, and the
// summary names the key; unsigned, or signed by another key, it fails for
// good before any layer is downloaded, saying what the registry has.
func TestAModelImageIsPulledOnlyWhenSignedByAKeyOfTheSpec(t *testing.T) {
	reg := newTestRegistry(t, "")
	ours, next, stranger := sigtest.NewKey(t), sigtest.NewKey(t), sigtest.NewKey(t)
	keys := []string{next.PublicPEM(), ours.PublicPEM()}
	push := func(tag string, versions ...int) (string, name.Digest) {
		uri := reg.push(t, tag, imageOf(t, entries(prefixed("models/", model(versions...)))))
		return uri, pushedDigest(t, reg, tag)
	}

	simple, simpleDigest := push("m:simple", 1)
	if err := ours.PushSimpleSignature(simpleDigest); err != nil {
		t.Fatal(err)
	}
	bundled, bundledDigest := push("m:bundle", 2)
	if err := ours.PushBundle(bundledDigest); err != nil {
		t.Fatal(err)
	}
	for uri, want := range map[string]map[string][]byte{simple: model(1), bundled: model(2)} {
		o, logs := testOptions(t, uri, "")
		o.SignatureKeys = keys
		sum, err := Run(context.Background(), o)
		if err != nil {
			t.Fatalf("%s: %v\n%s", uri, err, logs)
		}
		assertTree(t, o.Dest, want)
		if id := keyID(t, ours.PublicPEM()); sum.SignedBy != id {
			t.Errorf("%s: signed by %q, want %q", uri, sum.SignedBy, id)
		}
		if !strings.Contains(logs.String(), `"msg":"the image's cosign signature verifies"`) {
			t.Errorf("%s: the log does not say the signature verifies:\n%s", uri, logs)
		}
	}

	unsigned, _ := push("m:unsigned", 3)
	other, otherDigest := push("m:other", 4)
	if err := stranger.PushSimpleSignature(otherDigest); err != nil {
		t.Fatal(err)
	}
	if err := stranger.PushBundle(otherDigest); err != nil {
		t.Fatal(err)
	}
	for uri, want := range map[string][]string{
		unsigned: {"has no cosign signature", "sha256-", ".sig", "cosign sign --key"},
		other:    {"no cosign signature by a key of spec.model.signature", "bundle sha256:", "not made by any of the keys", "tagged signature 1: not made by any of the keys"},
	} {
		before := reg.blobs.Load()
		o, _ := testOptions(t, uri, "")
		o.SignatureKeys = keys
		fe := wantFailure(t, mustFail(Run(context.Background(), o)), servingv1alpha1.ReasonSignatureNotVerified, ExitPermanent)
		for _, w := range want {
			if !strings.Contains(fe.Message, w) {
				t.Errorf("%s: message %q: want %q in it", uri, fe.Message, w)
			}
		}
		// The signature blobs only: no layer of the model.
		if n := reg.blobs.Load() - before; n > 2 {
			t.Errorf("%s: %d blobs downloaded; want none of the model's", uri, n)
		}
		assertNothingPublished(t, o.Dest)
	}

	// Signatures stored in another repository (COSIGN_REPOSITORY): found
	// there when the spec says so, not otherwise.
	elsewhere, elsewhereDigest := push("m:elsewhere", 5)
	sigs, err := name.NewRepository(reg.host + "/signatures")
	if err != nil {
		t.Fatal(err)
	}
	if err := ours.PushSimpleSignatureTo(elsewhereDigest, sigs); err != nil {
		t.Fatal(err)
	}
	o, logs := testOptions(t, elsewhere, "")
	o.SignatureKeys, o.SignatureRepository = keys, sigs.String()
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatalf("signatures in %s: %v\n%s", sigs, err, logs)
	}
	o, _ = testOptions(t, elsewhere, "")
	o.SignatureKeys = keys
	wantFailure(t, mustFail(Run(context.Background(), o)), servingv1alpha1.ReasonSignatureNotVerified, ExitPermanent)

	o, _ = testOptions(t, "s3://bucket/m", "")
	o.SignatureKeys = keys
	wantFailure(t, mustFail(Run(context.Background(), o)), servingv1alpha1.ReasonFetchFailed, ExitPermanent)
}

// A signature of the image index a tag names (cosign signs what the tag
// names) verifies the node's image it holds.
func TestASignedIndexVerifiesTheNodesImage(t *testing.T) {
	reg := newTestRegistry(t, "")
	key := sigtest.NewKey(t)
	uri := reg.pushIndex(t, "m:multi", imageIndex(map[string]v1.Image{runtime.GOARCH: imageOf(t, entries(prefixed("models/", model(1))))}))
	if err := key.PushBundle(pushedDigest(t, reg, "m:multi")); err != nil {
		t.Fatal(err)
	}
	o, logs := testOptions(t, uri, "")
	o.SignatureKeys = []string{key.PublicPEM()}
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	assertTree(t, o.Dest, model(1))
}

func keyID(t *testing.T, pem string) string {
	t.Helper()
	k, err := imagesig.ParseKey(pem)
	if err != nil {
		t.Fatal(err)
	}
	return k.ID
}
