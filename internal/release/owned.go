package release

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// ownerOf reads the owner the values name (the chart stamps it on every
// object it renders), or nil if they name none.
func ownerOf(vals map[string]any) *metav1.OwnerReference {
	o, _ := vals["owner"].(map[string]any)
	str := func(k string) string { s, _ := o[k].(string); return s }
	if str("uid") == "" || str("name") == "" {
		return nil
	}
	return &metav1.OwnerReference{APIVersion: str("apiVersion"), Kind: str("kind"), Name: str("name"), UID: types.UID(str("uid"))}
}

// ownedBy gives the records client for owner: secrets itself if there is
// none.
func ownedBy(secrets corev1client.SecretInterface, owner *metav1.OwnerReference) corev1client.SecretInterface {
	if owner == nil {
		return secrets
	}
	return ownedRecords{SecretInterface: secrets, owner: *owner}
}

// ownedRecords stamps the owner on each release record Helm writes, as the
// chart stamps it on each object: when the owner is deleted, the garbage
// collector removes the records with the objects, and no finalizer has to
// hold the owner until an operator uninstalls the release.
type ownedRecords struct {
	corev1client.SecretInterface
	owner metav1.OwnerReference
}

func (s ownedRecords) Create(ctx context.Context, secret *corev1.Secret, opts metav1.CreateOptions) (*corev1.Secret, error) {
	return s.SecretInterface.Create(ctx, s.stamp(secret), opts)
}

// Update stamps the owner too: Helm's driver builds the Secret anew for an
// update, and would otherwise drop the reference.
func (s ownedRecords) Update(ctx context.Context, secret *corev1.Secret, opts metav1.UpdateOptions) (*corev1.Secret, error) {
	return s.SecretInterface.Update(ctx, s.stamp(secret), opts)
}

func (s ownedRecords) stamp(secret *corev1.Secret) *corev1.Secret {
	for _, ref := range secret.OwnerReferences {
		if ref.UID == s.owner.UID {
			return secret
		}
	}
	secret = secret.DeepCopy()
	secret.OwnerReferences = append(secret.OwnerReferences, s.owner)
	return secret
}
