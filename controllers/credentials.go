package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/status"
)

// credentialsLookAgain is how often the credentials Secret of a fetch the
// store refused is looked at for a change: keys are mended in the Secret,
// in place, which nothing watched says.
const credentialsLookAgain = time.Minute

// observeRefusedCredentials reads when each credentials Secret that a
// store refused a failed fetch for was last changed (its metadata alone,
// one GET each), so that the fetch is made again once it has been
// (desired.Observed.CredentialsChanged), and looks again in a minute.
func (r *ModelServerReconciler) observeRefusedCredentials(ctx context.Context, ms *servingv1alpha1.ModelServer, obs *observed) error {
	for _, fj := range obs.FetchJobs {
		secret, _ := status.CredentialsRefused(fj)
		if _, read := obs.CredentialsChanged[secret]; secret == "" || read {
			continue
		}
		meta := &metav1.PartialObjectMetadata{}
		meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ms.Namespace, Name: secret}, meta)
		if apierrors.IsNotFound(err) {
			continue // checkSecrets names it
		} else if err != nil {
			return fmt.Errorf("read the credentials Secret %s: %w", secret, err)
		}
		if obs.CredentialsChanged == nil {
			obs.CredentialsChanged = map[string]time.Time{}
		}
		obs.CredentialsChanged[secret] = lastChanged(meta.ObjectMeta)
		obs.sooner(credentialsLookAgain)
	}
	return nil
}

// lastChanged is when an object was last written, as its managed fields
// say (the apiserver stamps each writer's entry): kubectl apply, edit,
// create secret --dry-run | apply, a controller's update.
func lastChanged(m metav1.ObjectMeta) time.Time {
	at := m.CreationTimestamp.Time
	for _, f := range m.ManagedFields {
		if f.Time != nil && f.Time.After(at) {
			at = f.Time.Time
		}
	}
	return at
}
