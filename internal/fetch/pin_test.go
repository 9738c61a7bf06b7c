package fetch

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// TestAPinnedCopyMustBeTheModelTheJobVerified: a serving pod's own copy
// (storage mode PerPod) of a store changed in place since the Job fetched
// it fails for good, again on a restart of the container, and the same
// model passes.
func TestAPinnedCopyMustBeTheModelTheJobVerified(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, model(1))
	o, _ := testOptions(t, src, "")
	job, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}

	pod, _ := testOptions(t, src, "")
	pod.Pin = Pin{Digest: job.Digest}
	if sum, err := Run(context.Background(), pod); err != nil || sum.Digest != job.Digest {
		t.Fatalf("the same model pinned: %+v, %v", sum, err)
	}

	if err := os.WriteFile(filepath.Join(src, "1", "variables", "variables.index"), []byte("changed in place"), 0o644); err != nil {
		t.Fatal(err)
	}
	changed, _ := testOptions(t, src, "")
	changed.Pin = Pin{Digest: job.Digest}
	for attempt := range 2 {
		_, err := Run(context.Background(), changed)
		wantFailure(t, err, servingv1alpha1.ReasonModelChanged, ExitPermanent)
		if msg := AsError(err).Message; !strings.Contains(msg, "not "+job.Digest[:len("sha256:")+12]+")") || !strings.Contains(msg, "refetch") {
			t.Errorf("attempt %d: %s", attempt, msg)
		}
	}
}

func TestAPinnedImageAppliesToOCIModelsOnly(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, model(1))
	o, _ := testOptions(t, src, "")
	o.Pin = Pin{Digest: "sha256:x", Image: "registry.example.com/models/resnet@sha256:" + strings.Repeat("a", 64)}
	_, err := Run(context.Background(), o)
	wantFailure(t, err, servingv1alpha1.ReasonInvalidURI, ExitPermanent)
}

// TestAPodPullsTheImageItsJobResolvedThoughTheTagMoved: an oci:// model's
// pin names the image its tag named when the Job pulled it; a pod that
// starts after the tag moved pulls that image, not the tag's new one.
func TestAPodPullsTheImageItsJobResolvedThoughTheTagMoved(t *testing.T) {
	reg := newTestRegistry(t, "")
	uri := reg.push(t, "team/resnet:v1", imageOf(t, entries(prefixed("models/", model(1)))))
	o, _ := testOptions(t, uri, "")
	job, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	reg.push(t, "team/resnet:v1", imageOf(t, entries(prefixed("models/", model(7)))))

	pod, logs := testOptions(t, uri, "")
	pod.Pin = Pin{Digest: job.Digest, Image: job.Image}
	sum, err := Run(context.Background(), pod)
	if err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	if sum.Image != job.Image || sum.Digest != job.Digest {
		t.Errorf("the pod pulled %s (%s), want the Job's %s (%s)", sum.Image, sum.Digest, job.Image, job.Digest)
	}
	assertTree(t, pod.Dest, model(1))
}

// TestAModelLargerThanItsEmptyDirIsRefusedBeforeTheDownload: in storage
// mode PerPod the volume is an emptyDir whose file system is the node's;
// its size limit, given, refuses a model that cannot fit, as a claim's
// size does, instead of the kubelet evicting the pod half way.
func TestAModelLargerThanItsEmptyDirIsRefusedBeforeTheDownload(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, model(1, 2))
	o, _ := testOptions(t, src, "")
	o.VolumeSize = 16 << 10
	_, err := Run(context.Background(), o)
	wantFailure(t, err, servingv1alpha1.ReasonTooLarge, ExitPermanent)
	if msg := AsError(err).Message; !strings.Contains(msg, "of 16.0 KiB") || !strings.Contains(msg, "spec.storage.size") {
		t.Errorf("message %q", msg)
	}
	if entries, _ := os.ReadDir(filepath.Dir(o.Dest)); len(entries) > 1 {
		t.Errorf("the volume holds %d entries after the refusal", len(entries))
	}
	o.VolumeSize = 1 << 20
	if _, err := Run(context.Background(), o); err != nil {
		t.Errorf("a volume of 1 MiB: %v", err)
	}
}
