package controllers

import (
	"context"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// installedPriority is the queue priority of a ModelServer woken by one of
// its objects. A burst of new ModelServers queues an install each, and the
// queue would otherwise serve them first in, first out: a ModelServer whose
// pods are ready would wait behind every install queued before it to say
// so. What its objects report is a cheap reconcile, mostly a status write;
// it goes first. New ModelServers keep the default priority, and the
// informers' initial lists the lowest.
const installedPriority = 10

// firstForInstalled raises to installedPriority what an owned object's
// event enqueues.
type firstForInstalled struct {
	handler.EventHandler
}

func (h firstForInstalled) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.EventHandler.Create(ctx, e, raised(q))
}

func (h firstForInstalled) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.EventHandler.Update(ctx, e, raised(q))
}

func (h firstForInstalled) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.EventHandler.Delete(ctx, e, raised(q))
}

func (h firstForInstalled) Generic(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.EventHandler.Generic(ctx, e, raised(q))
}

// raised gives what is added to q without a priority of its own
// installedPriority; a queue without priorities is returned as it is.
func raised(q workqueue.TypedRateLimitingInterface[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
	if !ok {
		return q
	}
	return raisedQueue{pq}
}

// raisedQueue is still a priority queue, so that the handler it is given
// to can lower the priority of what an initial list or a resync repeats.
type raisedQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
}

func (q raisedQueue) Add(item reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{}, item)
}

func (q raisedQueue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	if o.Priority == nil {
		o.Priority = ptr.To(installedPriority)
	}
	q.PriorityQueue.AddWithOpts(o, items...)
}

// ownerHandler enqueues the ModelServer that controls an object, as Owns
// does, at installedPriority.
func ownerHandler(c client.Client) handler.EventHandler {
	return firstForInstalled{handler.EnqueueRequestForOwner(c.Scheme(), c.RESTMapper(), &servingv1alpha1.ModelServer{}, handler.OnlyControllerOwner())}
}
