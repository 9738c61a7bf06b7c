package controllers

import (
	"context"
	"maps"
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
// their names, image pull secrets and role annotations alone, which is
// all it reads of them.
func ServiceAccountsCache() cache.ByObject {
	return cache.ByObject{Transform: func(o any) (any, error) {
		sa, ok := o.(*corev1.ServiceAccount)
		if !ok {
			return o, nil
		}
		return &corev1.ServiceAccount{
			ObjectMeta: metav1.ObjectMeta{
				Name: sa.Name, Namespace: sa.Namespace, UID: sa.UID, ResourceVersion: sa.ResourceVersion,
				DeletionTimestamp: sa.DeletionTimestamp, Annotations: roleAnnotations(sa),
			},
			ImagePullSecrets: sa.ImagePullSecrets,
		}, nil
	}}
}

// roleAnnotations are the annotations of sa that name the identity its
// pods take (values.AccountAnnotations); nil for none.
func roleAnnotations(sa *corev1.ServiceAccount) map[string]string {
	var out map[string]string
	for _, k := range values.AccountAnnotations {
		if v, ok := sa.Annotations[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// observeServiceAccount reads what ms's fetch takes from the pods'
// service account (values.NeedsServiceAccount): nothing when it takes
// nothing, or the account does not exist.
func (r *ModelServerReconciler) observeServiceAccount(ctx context.Context, ms *servingv1alpha1.ModelServer) (values.Account, error) {
	name, ok := values.NeedsServiceAccount(ms)
	if !ok {
		return values.Account{}, nil
	}
	sa, err := getIfExists(ctx, r, ms.Namespace, name, &corev1.ServiceAccount{})
	if err != nil || sa == nil {
		return values.Account{}, err
	}
	account := values.Account{
		RoleARN: sa.Annotations[values.AnnotationRoleARN], Audience: sa.Annotations[values.AnnotationRoleAudience],
		ClientID: sa.Annotations[values.AnnotationClientID], TenantID: sa.Annotations[values.AnnotationTenantID],
		GoogleServiceAccount: sa.Annotations[values.AnnotationGoogleServiceAccount],
	}
	for _, s := range sa.ImagePullSecrets {
		account.PullSecrets = append(account.PullSecrets, s.Name)
	}
	return account, nil
}

// serviceAccountModelServers are the ModelServers whose fetch reads
// service account o.
func (r *ModelServerReconciler) serviceAccountModelServers(ctx context.Context, o client.Object) []reconcile.Request {
	return r.modelServersIn(ctx, o.GetNamespace(), func(ms *servingv1alpha1.ModelServer) bool {
		name, ok := values.NeedsServiceAccount(ms)
		return ok && name == o.GetName()
	})
}

// accountChanged lets through the service accounts whose image pull
// secrets or role are news: one made or deleted with some, one whose
// list or role changed. The accounts every namespace is made with, and
// the tokens the controllers add to them, are not.
var accountChanged = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool { return givesFetches(e.Object) },
	DeleteFunc: func(e event.DeleteEvent) bool { return givesFetches(e.Object) },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, okOld := e.ObjectOld.(*corev1.ServiceAccount)
		n, okNew := e.ObjectNew.(*corev1.ServiceAccount)
		return okOld && okNew && (!slices.Equal(o.ImagePullSecrets, n.ImagePullSecrets) || !maps.Equal(roleAnnotations(o), roleAnnotations(n)))
	},
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// givesFetches says that account o has what a fetch may take from it.
func givesFetches(o client.Object) bool {
	sa, ok := o.(*corev1.ServiceAccount)
	return ok && (len(sa.ImagePullSecrets) > 0 || roleAnnotations(sa) != nil)
}
