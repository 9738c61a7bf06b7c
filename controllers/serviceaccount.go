package controllers

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// An oci:// model's fetch reads registry credentials from the serving
// pods' image pull secrets. Where the pod template names none, a pod gets
// its service account's (the ServiceAccount admission plugin adds them),
// and so does the fetch: the operator reads the account, as the kubelet's
// pods would use it, and mounts its pull secrets into the fetch Job.

// ServiceAccountsCache is how the operator's cache holds ServiceAccounts:
// their names and image pull secrets alone, which is all it reads of
// them.
func ServiceAccountsCache() cache.ByObject {
	return cache.ByObject{Transform: func(o any) (any, error) {
		sa, ok := o.(*corev1.ServiceAccount)
		if !ok {
			return o, nil
		}
		return &corev1.ServiceAccount{
			ObjectMeta: metav1.ObjectMeta{
				Name: sa.Name, Namespace: sa.Namespace, UID: sa.UID, ResourceVersion: sa.ResourceVersion,
				DeletionTimestamp: sa.DeletionTimestamp,
			},
			ImagePullSecrets: sa.ImagePullSecrets,
		}, nil
	}}
}

// observeServiceAccount reads the image pull secrets of the service
// account whose pull secrets ms's fetch reads (values.NeedsServiceAccount);
// none when it reads none, or the account does not exist.
func (r *ModelServerReconciler) observeServiceAccount(ctx context.Context, ms *servingv1alpha1.ModelServer) ([]string, error) {
	name, ok := values.NeedsServiceAccount(ms)
	if !ok {
		return nil, nil
	}
	sa, err := getIfExists(ctx, r, ms.Namespace, name, &corev1.ServiceAccount{})
	if err != nil || sa == nil {
		return nil, err
	}
	var out []string
	for _, s := range sa.ImagePullSecrets {
		out = append(out, s.Name)
	}
	return out, nil
}

// serviceAccountModelServers are the ModelServers whose fetch reads the
// image pull secrets of service account o.
func (r *ModelServerReconciler) serviceAccountModelServers(ctx context.Context, o client.Object) []reconcile.Request {
	return r.modelServersIn(ctx, o.GetNamespace(), func(ms *servingv1alpha1.ModelServer) bool {
		name, ok := values.NeedsServiceAccount(ms)
		return ok && name == o.GetName()
	})
}

// pullSecretsChanged lets through the service accounts whose image pull
// secrets are news: one made or deleted with some, one whose list
// changed. The accounts every namespace is made with, and the tokens the
// controllers add to them, are not.
var pullSecretsChanged = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool { return hasPullSecrets(e.Object) },
	DeleteFunc: func(e event.DeleteEvent) bool { return hasPullSecrets(e.Object) },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, okOld := e.ObjectOld.(*corev1.ServiceAccount)
		n, okNew := e.ObjectNew.(*corev1.ServiceAccount)
		return okOld && okNew && !slices.Equal(o.ImagePullSecrets, n.ImagePullSecrets)
	},
	GenericFunc: func(event.GenericEvent) bool { return false },
}

func hasPullSecrets(o client.Object) bool {
	sa, ok := o.(*corev1.ServiceAccount)
	return ok && len(sa.ImagePullSecrets) > 0
}
