package controllers

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestWhatAnInstalledModelServersObjectsReportGoesBeforeNewInstalls(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	req := func(name string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}
	}
	q.Add(req("new-1"))
	q.Add(req("new-2"))
	raised(q).Add(req("installed"))
	// What an initial list repeats stays below everything.
	raised(q).(priorityqueue.PriorityQueue[reconcile.Request]).AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(handler.LowPriority)}, req("relisted"))

	var order []string
	for range 4 {
		item, _, _ := q.GetWithPriority()
		order = append(order, item.Name)
		q.Done(item)
	}
	if order[0] != "installed" || order[3] != "relisted" {
		t.Errorf("order %v, want installed first and relisted last", order)
	}
}
