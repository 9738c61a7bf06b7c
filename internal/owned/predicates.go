package owned

import (
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/modelserver-dev/modelserver-operator/internal/status"
)

// The owned objects' status changes all the time (every pod that starts
// updates its Deployment's status); these let through only the changes the
// ModelServer's status or release depends on.

func deploymentChanged(e event.UpdateEvent) bool {
	o, okOld := e.ObjectOld.(*appsv1.Deployment)
	n, okNew := e.ObjectNew.(*appsv1.Deployment)
	if !okOld || !okNew {
		return true
	}
	return o.Generation != n.Generation ||
		o.Status.ObservedGeneration != n.Status.ObservedGeneration ||
		o.Status.Replicas != n.Status.Replicas ||
		o.Status.UpdatedReplicas != n.Status.UpdatedReplicas ||
		o.Status.ReadyReplicas != n.Status.ReadyReplicas ||
		status.RolloutProblem(o) != status.RolloutProblem(n) ||
		!equality.Semantic.DeepEqual(o.Labels, n.Labels)
}

// autoscalerChanged lets through a new spec, and a change of what the
// autoscaler says keeps it from scaling, or of whether it wants more pods
// than its maximum; not the metrics and counts it rewrites at each sync
// (every 15 s).
func autoscalerChanged(e event.UpdateEvent) bool {
	o, okOld := e.ObjectOld.(*autoscalingv2.HorizontalPodAutoscaler)
	n, okNew := e.ObjectNew.(*autoscalingv2.HorizontalPodAutoscaler)
	if !okOld || !okNew {
		return true
	}
	return o.Generation != n.Generation || status.AutoscalerFault(o) != status.AutoscalerFault(n) ||
		status.AutoscalerLimited(o) != status.AutoscalerLimited(n)
}

func jobChanged(e event.UpdateEvent) bool {
	o, okOld := e.ObjectOld.(*batchv1.Job)
	n, okNew := e.ObjectNew.(*batchv1.Job)
	if !okOld || !okNew {
		return true
	}
	return o.Generation != n.Generation ||
		status.FetchStateOf(o) != status.FetchStateOf(n) ||
		!equality.Semantic.DeepEqual(o.Labels, n.Labels)
}

func claimChanged(e event.UpdateEvent) bool {
	o, okOld := e.ObjectOld.(*corev1.PersistentVolumeClaim)
	n, okNew := e.ObjectNew.(*corev1.PersistentVolumeClaim)
	if !okOld || !okNew {
		return true
	}
	return o.Status.Phase != n.Status.Phase || !equality.Semantic.DeepEqual(o.Labels, n.Labels)
}

func ingressAddressChanged(e event.UpdateEvent) bool {
	o, okOld := e.ObjectOld.(*networkingv1.Ingress)
	n, okNew := e.ObjectNew.(*networkingv1.Ingress)
	if !okOld || !okNew {
		return true
	}
	return !equality.Semantic.DeepEqual(o.Status.LoadBalancer, n.Status.LoadBalancer)
}
