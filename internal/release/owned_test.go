package release

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRecordsAreStampedWithTheOwnerTheValuesName(t *testing.T) {
	vals := map[string]any{"owner": map[string]any{
		"apiVersion": "serving.modelserver.dev/v1alpha1", "kind": "ModelServer", "name": "m", "uid": "u-1",
	}}
	owner := ownerOf(vals)
	if owner == nil || owner.UID != "u-1" || owner.Kind != "ModelServer" || owner.Name != "m" {
		t.Fatalf("ownerOf = %+v", owner)
	}
	if ownerOf(map[string]any{}) != nil || ownerOf(map[string]any{"owner": map[string]any{"name": "m"}}) != nil {
		t.Error("values without a whole owner gave one")
	}
	s := ownedRecords{owner: *owner}
	built := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.m.v1"}}
	stamped := s.stamp(built)
	if len(stamped.OwnerReferences) != 1 || stamped.OwnerReferences[0].UID != "u-1" {
		t.Errorf("stamped references %v", stamped.OwnerReferences)
	}
	if len(built.OwnerReferences) != 0 {
		t.Error("stamp changed the Secret it was given")
	}
	if again := s.stamp(stamped); len(again.OwnerReferences) != 1 {
		t.Errorf("stamped twice: %v", again.OwnerReferences)
	}
}
