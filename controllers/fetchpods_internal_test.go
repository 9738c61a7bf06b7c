package controllers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/modelserver-dev/modelserver-operator/internal/status"
)

const unboundClaim = "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims."

func fetchPod(phase corev1.PodPhase, scheduled *corev1.PodCondition, waiting *corev1.ContainerStateWaiting) *corev1.Pod {
	p := &corev1.Pod{Status: corev1.PodStatus{Phase: phase}}
	if scheduled != nil {
		p.Status.Conditions = []corev1.PodCondition{*scheduled, {Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	}
	if waiting != nil {
		p.Spec.NodeName = "node-1"
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "fetch", Image: "registry.example/fetcher:v1", State: corev1.ContainerState{Waiting: waiting}}}
	}
	return p
}

var (
	unschedulable = &corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: unboundClaim}
	pullFailed    = &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "unauthorized"}
	backingOff    = &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "registry.example/fetcher:v1": ErrImagePull: unauthorized`}
	creatingIt    = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
)

// The cache's summary of a Pending fetch pod says what keeps it from
// starting as the pod does; of a pod that runs, nothing of it is kept.
func TestAFetchPodsSummaryKeepsWhatKeepsItFromStarting(t *testing.T) {
	for _, pod := range []*corev1.Pod{
		fetchPod(corev1.PodPending, unschedulable, nil),
		fetchPod(corev1.PodPending, nil, pullFailed),
		fetchPod(corev1.PodPending, nil, backingOff),
	} {
		sum, err := fetchPodSummary(pod)
		if err != nil {
			t.Fatal(err)
		}
		want := status.FetchPodsProblem([]corev1.Pod{*pod}, nil)
		if got := status.FetchPodsProblem([]corev1.Pod{*sum.(*corev1.Pod)}, nil); want == "" || got != want {
			t.Errorf("summary says %q, the pod %q", got, want)
		}
	}
	running := fetchPod(corev1.PodRunning, &corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, nil)
	running.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "fetch", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	sum, _ := fetchPodSummary(running)
	if s := sum.(*corev1.Pod); len(s.Status.Conditions) != 0 || len(s.Status.ContainerStatuses) != 0 {
		t.Errorf("a running fetch pod's summary keeps %+v", s.Status)
	}
}

// A fetch pod wakes its ModelServer when it succeeds, and when what keeps
// it from starting changes, its end included; a pod with nothing wrong,
// and the kubelet's retries of a pull, wake nothing.
func TestAFetchPodWakesItsModelServerOnSuccessOrWhenWhatHoldsItChanges(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after *corev1.Pod
		wake          bool
	}{
		{"scheduled and starting", fetchPod(corev1.PodPending, nil, nil), fetchPod(corev1.PodPending, nil, creatingIt), false},
		{"started", fetchPod(corev1.PodPending, nil, creatingIt), fetchPod(corev1.PodRunning, nil, nil), false},
		{"no node can take it", fetchPod(corev1.PodPending, nil, nil), fetchPod(corev1.PodPending, unschedulable, nil), true},
		{"still none", fetchPod(corev1.PodPending, unschedulable, nil), fetchPod(corev1.PodPending, unschedulable, nil), false},
		{"its pull failed", fetchPod(corev1.PodPending, nil, creatingIt), fetchPod(corev1.PodPending, nil, pullFailed), true},
		{"the kubelet backs off", fetchPod(corev1.PodPending, nil, pullFailed), fetchPod(corev1.PodPending, nil, backingOff), false},
		{"the image turned up", fetchPod(corev1.PodPending, nil, backingOff), fetchPod(corev1.PodRunning, nil, nil), true},
		{"succeeded", fetchPod(corev1.PodRunning, nil, nil), fetchPod(corev1.PodSucceeded, nil, nil), true},
		{"succeeded, seen again", fetchPod(corev1.PodSucceeded, nil, nil), fetchPod(corev1.PodSucceeded, nil, nil), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fetchPodNews.Update(event.UpdateEvent{ObjectOld: tc.before, ObjectNew: tc.after}); got != tc.wake {
				t.Errorf("wakes %v, want %v", got, tc.wake)
			}
		})
	}
}
