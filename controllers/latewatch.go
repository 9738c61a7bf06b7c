package controllers

import (
	"context"
	"reflect"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/exposure"
)

// lateWatches are the watches of the Gateway API's kinds, started once a
// ModelServer asks for them and the cluster serves them: the operator
// must start without them, and a watch of a kind the cluster lacks would
// keep its controller from starting. The routes and the BackendTLSPolicy
// are watched by their metadata alone (their status changes wake their
// ModelServer; there are as many as ModelServers with spec.gateway), the
// Gateways whole (few, and what they say is read from the cache).
type lateWatches struct {
	ctrl  controller.Controller
	cache cache.Cache
	// gateways wakes the ModelServers routed through a Gateway.
	gateways handler.EventHandler
	// owner wakes the ModelServer a route or a policy belongs to.
	owner handler.EventHandler
	// caSources wake the ModelServers whose spec.tls.clientCA names a
	// ConfigMap, or a Secret, by kind, from a cache of their metadata of
	// its own (newCache, caCache): the manager's holds the operator's
	// ConfigMaps alone, and of Secrets those of type kubernetes.io/tls.
	caSources map[schema.GroupVersionKind]handler.EventHandler
	newCache  func() (cache.Cache, error)

	mu      sync.Mutex
	started map[schema.GroupVersionKind]cache.Informer
	caCache cache.Cache
	// caWatched are the informers of caSources, by kind, once a
	// ModelServer has asked for them.
	caWatched map[schema.GroupVersionKind]cache.Informer
}

// watching says that the operator watches the objects of gvk, one of the
// Gateway API kinds, and that its cache holds them: it starts the watch
// where the cluster serves the kind. False without a controller (a
// reconciler driven by hand), before the watch's first list is in, and
// where it cannot list them (an admin narrowed the operator's role):
// the caller then reads the apiserver and looks again later.
func (r *ModelServerReconciler) watching(ctx context.Context, gvk schema.GroupVersionKind) bool {
	if r.late == nil || !r.Releases.Knows(gvk) {
		return false
	}
	return r.late.watching(ctx, gvk)
}

func (w *lateWatches) watching(ctx context.Context, gvk schema.GroupVersionKind) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if inf, ok := w.started[gvk]; ok {
		return inf.HasSynced()
	}
	const instead = "its objects are read from the apiserver"
	if gvk == gatewayKind {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		return w.startWatch(ctx, &w.started, w.cache, u, w.gateways, gatewayNews, instead)
	}
	return w.startWatch(ctx, &w.started, w.cache, metadataOf(gvk), w.owner, lateOwnedNews, instead)
}

// watchingCASource says that a change of a ConfigMap or a Secret (gvk)
// wakes the ModelServers whose spec.tls.clientCA names it (caSourceNews):
// it starts the watch, by metadata alone, the first time a ModelServer
// asks. Until then, and before the watch's first list is in, the caller
// looks again later. A user's CA bundle is not labeled as the operator's
// ConfigMaps are, and a Secret of it may be of any type: the objects of
// the kind in the namespaces the operator serves are watched, their
// metadata alone, only once some ModelServer needs it.
func (r *ModelServerReconciler) watchingCASource(ctx context.Context, gvk schema.GroupVersionKind) bool {
	if r.late == nil || r.late.newCache == nil {
		return false
	}
	w := r.late
	w.mu.Lock()
	defer w.mu.Unlock()
	if inf, ok := w.caWatched[gvk]; ok {
		return inf.HasSynced()
	}
	const instead = "spec.tls.clientCA's object of it is read again every minute"
	if w.caCache == nil {
		c, err := w.newCache()
		if err != nil {
			log.FromContext(ctx).Info("cannot watch the kind; "+instead, "kind", gvk.Kind, "error", err.Error())
			return false
		}
		w.caCache = c
	}
	return w.startWatch(ctx, &w.caWatched, w.caCache, metadataOf(gvk), w.caSources[gvk], caSourceNews, instead)
}

// startWatch has the controller watch the kind of obj in c, through h and
// p, and records its informer in started; where it cannot, it logs what
// the caller does instead and returns false. The caller holds w.mu.
func (w *lateWatches) startWatch(ctx context.Context, started *map[schema.GroupVersionKind]cache.Informer, c cache.Cache,
	obj client.Object, h handler.EventHandler, p predicate.Predicate, instead string) bool {
	gvk := obj.GetObjectKind().GroupVersionKind()
	inf, err := c.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
	if err == nil {
		err = w.ctrl.Watch(source.Kind[client.Object](c, obj, h, p))
	}
	if err != nil {
		log.FromContext(ctx).Info("cannot watch the kind; "+instead, "kind", gvk.Kind, "error", err.Error())
		return false
	}
	if *started == nil {
		*started = map[schema.GroupVersionKind]cache.Informer{}
	}
	(*started)[gvk] = inf
	return inf.HasSynced()
}

// metadataOf is an object of gvk for a watch of metadata alone.
func metadataOf(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	return m
}

var (
	configMapKind = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	secretKind    = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
)

// caSourcesCache is how the cache of spec.tls.clientCA's objects holds
// Secrets: not Helm's release records, a Secret per revision of every
// release, which no ModelServer names.
func caSourcesCache() cache.ByObject {
	return cache.ByObject{Field: fields.OneTermNotEqualSelector("type", "helm.sh/release.v1")}
}

// caSourceNews lets through a ConfigMap or Secret made, changed or
// deleted: a CA bundle that comes, is rotated or goes; not a resync.
var caSourceNews = predicate.ResourceVersionChangedPredicate{}

// caSourceModelServers maps a ConfigMap or a Secret (of gvk) to the
// ModelServers whose spec.tls.clientCA names it.
func (r *ModelServerReconciler) caSourceModelServers(gvk schema.GroupVersionKind) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		return r.modelServersIn(ctx, o.GetNamespace(), func(ms *servingv1alpha1.ModelServer) bool {
			t := ms.Spec.TLS
			if t == nil || t.ClientCA == nil {
				return false
			}
			if gvk == configMapKind {
				return t.ClientCA.ConfigMapName == o.GetName()
			}
			return t.ClientCA.SecretName == o.GetName()
		})
	}
}

// cachedGateway reads a Gateway from the cache once it is watched: found
// false where it does not exist, and held false where the cache does not
// hold its namespace (an install restricted to some namespaces, a Gateway
// of another), which the caller then reads from the apiserver.
func (r *ModelServerReconciler) cachedGateway(ctx context.Context, key types.NamespacedName) (u *unstructured.Unstructured, found, held bool) {
	if !r.watching(ctx, gatewayKind) {
		return nil, false, false
	}
	u = &unstructured.Unstructured{}
	u.SetGroupVersionKind(gatewayKind)
	err := r.late.cache.Get(ctx, key, u)
	switch {
	case err == nil:
		return u, true, true
	case apierrors.IsNotFound(err):
		return nil, false, true
	}
	return nil, false, false
}

// lateOwnedNews lets through a change of a route or a policy, most often
// its Gateway's verdict in its status, and its deletion; not its making,
// which the reconcile that made it knows of, nor a resync.
var lateOwnedNews = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetResourceVersion() != e.ObjectNew.GetResourceVersion()
	},
}

// gatewayNews lets through a Gateway made or deleted, and a change of
// what a route's URL is made of (exposure.GatewayOf): not the status's
// other news, such as the count of routes each listener took, which
// changes with every route attached.
var gatewayNews = predicate.Funcs{
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		was, okWas := e.ObjectOld.(*unstructured.Unstructured)
		is, okIs := e.ObjectNew.(*unstructured.Unstructured)
		if !okWas || !okIs {
			return true
		}
		a, errA := exposure.GatewayOf(was)
		b, errB := exposure.GatewayOf(is)
		return errA != nil || errB != nil || !reflect.DeepEqual(a, b)
	},
}

// gatewayModelServers are the ModelServers whose spec.gateway names the
// Gateway o, of those the cache holds.
func (r *ModelServerReconciler) gatewayModelServers(ctx context.Context, o client.Object) []reconcile.Request {
	key := exposure.GatewayKey(o.GetNamespace(), o.GetName())
	claims, err := r.claims(ctx, nil)
	if err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, c := range claims {
		if slices.ContainsFunc(c.Parents, func(p exposure.Parent) bool { return p.Gateway == key }) {
			reqs = append(reqs, reconcile.Request{NamespacedName: c.ModelServer})
		}
	}
	return reqs
}
