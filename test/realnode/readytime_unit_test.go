package realnode

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// The timeline needs no cluster: it is fed the pods a watch would deliver.
func TestATimelineStepIsReachedWhenTheLastReplicaReachesIt(t *testing.T) {
	start := time.Now()
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	pod := func(name, component string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{values.LabelComponent: component}}}
	}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	exited := func(code int32) corev1.ContainerState {
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}
	}

	tl := newTimeline(2, map[string]bool{"old": true}, 1)
	fetch := pod("f", values.ComponentFetch)
	tl.sawPod(fetch, at(0.1))
	fetch.Status.ContainerStatuses = []corev1.ContainerStatus{{State: exited(1)}}
	tl.sawPod(fetch, at(1))
	fetch.Status.ContainerStatuses = []corev1.ContainerStatus{{State: exited(0)}}
	tl.sawPod(fetch, at(2))

	a, b := pod("a", "serving"), pod("b", "serving")
	tl.sawPod(a, at(0.2))
	a.Status.InitContainerStatuses = []corev1.ContainerStatus{{State: exited(0)}}
	a.Status.ContainerStatuses = []corev1.ContainerStatus{{State: running, Started: ptr.To(true), Ready: true}}
	tl.sawPod(a, at(3))
	if tl.complete() {
		t.Fatal("complete with one replica of two seen")
	}
	tl.sawPod(b, at(0.3))
	b.Status.InitContainerStatuses = []corev1.ContainerStatus{{State: exited(0)}}
	b.Status.ContainerStatuses = []corev1.ContainerStatus{{State: running, Started: ptr.To(false)}}
	tl.sawPod(b, at(4))
	b.Status.ContainerStatuses[0].Started = ptr.To(true)
	tl.sawPod(b, at(5))
	b.Status.ContainerStatuses[0].Ready = true
	tl.sawPod(b, at(6))
	tl.sawPod(b, at(7)) // a later event moves nothing
	// A pod there before the apply (an old replica, going) counts for
	// nothing.
	old := pod("old", "serving")
	old.Status.ContainerStatuses = []corev1.ContainerStatus{{State: running, Started: ptr.To(true), Ready: true}}
	tl.sawPod(old, at(8))
	if tl.complete() {
		t.Fatal("complete before the ModelServer was Ready")
	}
	ms := func(generation, observed int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"generation": generation},
			"status": map[string]any{
				"observedGeneration": observed,
				"conditions":         []any{map[string]any{"type": "Ready", "status": "True"}},
			},
		}}
	}
	tl.sawModelServer(ms(0, 0), at(0.05)) // Ready before the generation waited for
	tl.sawModelServer(ms(1, 0), at(6.2))  // not yet seen by the operator
	tl.sawModelServer(ms(1, 1), at(6.5))
	tl.sawModelServer(ms(1, 1), at(6.6))

	got := tl.since(start)
	want := [steps]float64{0.1, 1, 2, 0.3, 4, 4, 5, 6, 6.5}
	for s := range steps {
		if d := got[s].Seconds() - want[s]; d > 1e-6 || d < -1e-6 {
			t.Errorf("%s at %.2fs, want %.2fs", stepNames[s], got[s].Seconds(), want[s])
		}
	}
	if !tl.complete() {
		t.Error("not complete with every step seen")
	}
}

func TestReadyCountsOnlyAtTheCurrentGeneration(t *testing.T) {
	ms := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"generation": int64(2)},
		"status": map[string]any{
			"observedGeneration": int64(1),
			"conditions":         []any{map[string]any{"type": "Ready", "status": "True"}},
		},
	}}
	if readyNow(ms) {
		t.Error("Ready at generation 1 counted for generation 2")
	}
	ms.Object["status"].(map[string]any)["observedGeneration"] = int64(2)
	if !readyNow(ms) {
		t.Error("Ready at the current generation not counted")
	}
}
