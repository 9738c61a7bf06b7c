package controllers

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/modelserver-dev/modelserver-operator/internal/status"
)

const unboundClaim = "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims."

func fetchPod(phase corev1.PodPhase, scheduled *corev1.PodCondition, waiting *corev1.ContainerStateWaiting) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.Now()}, Status: corev1.PodStatus{Phase: phase}}
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
		_, want := status.FetchPodsProblem([]corev1.Pod{*pod}, nil)
		if _, got := status.FetchPodsProblem([]corev1.Pod{*sum.(*corev1.Pod)}, nil); want == "" || got != want {
			t.Errorf("summary says %q, the pod %q", got, want)
		}
	}
	// What the kubelet said of a scheduled pod is told from what the
	// scheduler said before by the time it was scheduled.
	scheduled := fetchPod(corev1.PodPending, &corev1.PodCondition{
		Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second)),
	}, creatingIt)
	sum, _ := fetchPodSummary(scheduled)
	if s := sum.(*corev1.Pod); !status.NothingStarted(s) || len(s.Status.Conditions) != 1 || !s.Status.Conditions[0].LastTransitionTime.Equal(&scheduled.Status.Conditions[0].LastTransitionTime) {
		t.Errorf("the summary of a scheduled pod being created: %+v; want it said to have started nothing, scheduled at %v",
			s.Status, scheduled.Status.Conditions[0].LastTransitionTime)
	}
	running := fetchPod(corev1.PodRunning, &corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, nil)
	running.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "fetch", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	sum, _ = fetchPodSummary(running)
	if s := sum.(*corev1.Pod); len(s.Status.Conditions) != 0 || len(s.Status.ContainerStatuses) != 0 {
		t.Errorf("a running fetch pod's summary keeps %+v", s.Status)
	}
}

// A fetch pod wakes its ModelServer when it succeeds, when what keeps it
// from starting changes, its end included, and when it starts after its
// grace, in which its Warning Events may have been said; a pod with
// nothing wrong, and the kubelet's retries of a pull, wake nothing.
func TestAFetchPodWakesItsModelServerOnSuccessOrWhenWhatHoldsItChanges(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after *corev1.Pod
		wake          bool
	}{
		{"scheduled and starting", fetchPod(corev1.PodPending, nil, nil), fetchPod(corev1.PodPending, nil, creatingIt), false},
		{"started", fetchPod(corev1.PodPending, nil, creatingIt), fetchPod(corev1.PodRunning, nil, nil), false},
		{"started late", late(fetchPod(corev1.PodPending, nil, creatingIt)), late(fetchPod(corev1.PodRunning, nil, nil)), true},
		{"started soon after it was scheduled late", late(fetchPod(corev1.PodPending, nil, creatingIt), true), late(fetchPod(corev1.PodRunning, nil, nil)), false},
		{"still being created late", late(fetchPod(corev1.PodPending, nil, creatingIt)), late(fetchPod(corev1.PodPending, nil, creatingIt)), false},
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

// late makes pod as old as a pod past its grace, and scheduled as long
// ago as created unless scheduled is true: then, a moment ago.
func late(pod *corev1.Pod, scheduled ...bool) *corev1.Pod {
	pod.CreationTimestamp = metav1.NewTime(time.Now().Add(-fetchPodStartGrace - time.Second))
	if len(scheduled) > 0 && scheduled[0] {
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{
			Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Second)),
		})
	}
	return pod
}
