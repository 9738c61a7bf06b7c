package controllers_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/controllers"
	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
	"github.com/modelserver-dev/modelserver-operator/internal/names"
	"github.com/modelserver-dev/modelserver-operator/internal/status"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// Scaling past the namespace's pod quota: the apiserver refuses the new
// pod at every retry, and the status says so, in the apiserver's words,
// rather than only that 2 of 3 pods are there.
func TestServingPodsTheQuotaRefusesAreNamedInTheStatus(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	ms := readyModelServer(t, ns, "quota")
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("2")}},
	}
	if err := env.client.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(ms.DeepCopy())
	ms.Spec.Replicas = ptr.To[int32](3)
	if err := env.client.Patch(ctx, ms, patch); err != nil {
		t.Fatal(err)
	}
	got := &servingv1alpha1.ModelServer{}
	eventually(t, 60*time.Second, "the refusal in the status", func(ctx context.Context) (bool, string) {
		if err := env.client.Get(ctx, client.ObjectKeyFromObject(ms), got); err != nil {
			return false, err.Error()
		}
		return strings.Contains(got.Status.Message, "serving pods cannot be created: ") && strings.Contains(got.Status.Message, "quota"),
			string(got.Status.Phase) + ": " + got.Status.Message
	})
	t.Logf("%s: %s", got.Status.Phase, got.Status.Message)
	if got.Status.Phase != servingv1alpha1.PhaseDeploying || strings.Contains(got.Status.Message, `pods "`) {
		t.Errorf("%s: %s; want Deploying, without the refused pod's name", got.Status.Phase, got.Status.Message)
	}
}

// A serving image that cannot be pulled: the pod waits, and once the
// rollout has stood still for 30 s the status says why, in the kubelet's
// words. The pods are read then, not before, and not at every reconcile
// after: again after as long as the rollout has stood still. The kubelet
// alternates between pulling again and backing off; the status says the
// same either way, so that its retries cost no write. The test plays the
// kubelet, writing the pod's status as it would (test/realnode has a real
// one fail a real pull), and the clock.
func TestAServingImageThatCannotBePulledIsNamedInTheStatus(t *testing.T) {
	c, pod := stalledModelServer(t, "nopull")
	pulls := map[string]string{"cause": status.CauseImagePull}
	before := gather(t).value("modelserver_stalled_rollouts", pulls)
	image := pod.Spec.Containers[0].Image
	const pullError = `rpc error: code = NotFound desc = failed to pull and unpack image: not found`
	setContainerState(t, pod, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: pullError}})
	c.expect(29*time.Second, 0, time.Second)
	c.expect(31*time.Second, 1, time.Minute)    // written with its Warning; read again at 91 s
	c.expect(42*time.Second, 1, 49*time.Second) // the last read stands
	want := fmt.Sprintf("1 serving pod cannot pull image %q: %s", image, pullError)
	got := c.get()
	t.Logf("%s: %s", got.Status.Phase, got.Status.Message)
	if got.Status.Phase != servingv1alpha1.PhaseDeploying || !strings.HasSuffix(got.Status.Message, "; "+want) {
		t.Fatalf("%s: %q; want Deploying, ending with %q", got.Status.Phase, got.Status.Message, want)
	}
	if n := gather(t).value("modelserver_stalled_rollouts", pulls) - before; n != 1 {
		t.Errorf("stalled rollouts%v went up by %v, want 1", pulls, n)
	}
	c.expectStalledWarning(want)

	// Backing off: read again, the same words, no write; the next read
	// after as long again.
	setContainerState(t, pod, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
		Reason: "ImagePullBackOff", Message: fmt.Sprintf("Back-off pulling image %q: ErrImagePull: %s", image, pullError),
	}})
	c.expect(92*time.Second, 2, 92*time.Second)
	c.expect(103*time.Second, 2, 81*time.Second)
	if after := c.get(); after.ResourceVersion != got.ResourceVersion {
		t.Errorf("the status was rewritten while the kubelet backed off: %q, then %q", got.Status.Message, after.Status.Message)
	}
	c.expectStalledWarning(want) // still the one

	// The image turns up: the pod runs and is ready, and so is the
	// ModelServer once the pod has stayed ready for 2 s (the clock moves
	// on a second a look), with nothing left of the failure and no more
	// reads.
	setContainerState(t, pod, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}})
	at := 104 * time.Second
	eventually(t, 30*time.Second, "nopull Ready", func(context.Context) (bool, string) {
		c.reconcile(c.since.Add(at))
		at += time.Second
		got = c.get()
		return got.Status.Phase == servingv1alpha1.PhaseReady, string(got.Status.Phase) + ": " + got.Status.Message
	})
	if n := gather(t).value("modelserver_stalled_rollouts", pulls) - before; n != 0 {
		t.Errorf("stalled rollouts%v up by %v once Ready, want 0", pulls, n)
	}
	c.expectStalledWarning(want)
	if got.Status.Message != "" || c.reads.n.Load() != 2 || c.reads.events.Load() != 0 {
		t.Errorf("Ready with message %q, after %d reads of the serving pods and %d of their Events; want none, 2, 0 (their status said it all)",
			got.Status.Message, c.reads.n.Load(), c.reads.events.Load())
	}

	// The image is lost again: news again, though in the same words.
	setContainerState(t, pod, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: pullError}})
	eventually(t, 30*time.Second, "a second RolloutStalled Warning", func(context.Context) (bool, string) {
		c.reconcile(c.since.Add(140 * time.Second))
		return c.events.count("RolloutStalled") == 2, c.events.String()
	})
	// It was Ready before, so it is Degraded now, and Ready again once the
	// pod has stayed ready for 2 s.
	setContainerState(t, pod, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}})
	at = 141 * time.Second
	eventually(t, 30*time.Second, "nopull Ready again", func(context.Context) (bool, string) {
		c.reconcile(c.since.Add(at))
		at += time.Second
		got = c.get()
		return got.Status.Phase == servingv1alpha1.PhaseReady, string(got.Status.Phase) + ": " + got.Status.Message
	})
}

// A pod that has started nothing says why only in the kubelet's Events:
// the status names the newest Warning, read with the pods.
func TestAServingPodThatCannotMountItsVolumeIsExplainedByItsEvent(t *testing.T) {
	c, pod := stalledModelServer(t, "nomount")
	setContainerState(t, pod, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}})
	const mount = `MountVolume.SetUp failed for volume "model" : mount failed: exit status 32`
	kubeletEvent(t, pod, pod.UID, "", corev1.EventTypeWarning, "FailedMount", mount)
	c.expect(31*time.Second, 1, time.Minute) // written with its Warning
	got := c.get()
	if want := "; 1 serving pod cannot start: FailedMount: " + mount; !strings.HasSuffix(got.Status.Message, want) || c.reads.events.Load() != 1 {
		t.Errorf("%s, after %d reads of the pod's Events; want it to end with %q, after 1", got.Status.Message, c.reads.events.Load(), want)
	}
}

// A serving container that exits with code 137, not out of memory, may
// have been killed by the kubelet for a failed probe; only the kubelet's
// Killing Event says so, and the status then names the probe and how
// long it allowed, from the pod's spec: for the startup probe, the
// ModelServer's loadTimeoutSeconds.
func TestAServingContainerKilledForItsStartupProbeIsNamedAsSuch(t *testing.T) {
	c, pod := stalledModelServer(t, "slowload", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.PodTemplate.LoadTimeoutSeconds = ptr.To[int64](900)
	})
	name := pod.Spec.Containers[0].Name
	pod.Status.ContainerStatuses[0].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error"}}
	setContainerState(t, pod, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}})
	kubeletEvent(t, pod, pod.UID, name, corev1.EventTypeWarning, "Unhealthy", "Startup probe failed: dial tcp 198.18.0.7:8501: connect: connection refused")
	kubeletEvent(t, pod, pod.UID, name, corev1.EventTypeNormal, "Killing", fmt.Sprintf("Container %s failed startup probe, will be restarted", name))
	// Another pod's: not this one's cause.
	kubeletEvent(t, pod, "4c1a0f3e-0000-4000-8000-000000000000", name, corev1.EventTypeNormal, "Killing", fmt.Sprintf("Container %s failed liveness probe, will be restarted", name))

	c.expect(31*time.Second, 1, time.Minute) // written with its Warning
	got := c.get()
	want := fmt.Sprintf("1 serving pod cannot keep container %q running: it exits with code 137 (killed by the kubelet: its startup probe failed for 900s; a model that takes longer to load needs a larger spec.podTemplate.loadTimeoutSeconds)", name)
	if !strings.HasSuffix(got.Status.Message, "; "+want) || c.reads.events.Load() != 1 {
		t.Errorf("%s, after %d reads of the pod's Events; want it to end with %q, after 1", got.Status.Message, c.reads.events.Load(), want)
	}
	c.expectStalledWarning(want)
}

// kubeletEvent writes an Event as the kubelet writes one about pod (by
// the UID given, which another pod's may be), and about one of its
// containers unless container is "" (a volume's, the sandbox's).
func kubeletEvent(t *testing.T, pod *corev1.Pod, uid types.UID, container, kind, reason, message string) {
	t.Helper()
	event := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: pod.Namespace, GenerateName: pod.Name + "."},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: uid},
		Type:           kind, Reason: reason, Message: message,
		Source: corev1.EventSource{Component: "kubelet"}, FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 3,
	}
	if container != "" {
		event.InvolvedObject.FieldPath = "spec.containers{" + container + "}"
	}
	if err := env.client.Create(context.Background(), event); err != nil {
		t.Fatal(err)
	}
}

// stalledModelServer creates a ModelServer whose one serving pod runs and
// is never ready, reconciled by a clockedReconciler, and returns them once
// its model is fetched and the status says so; since is then when it did.
func stalledModelServer(t *testing.T, name string, mutate ...func(*servingv1alpha1.ModelServer)) (*clockedReconciler, *corev1.Pod) {
	t.Helper()
	_, r, _ := recordingReconciler(t)
	ms := createUnmanaged(t, name, append([]func(*servingv1alpha1.ModelServer){func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Replicas = ptr.To[int32](1)
		ms.Spec.PodTemplate.Annotations = map[string]string{localcluster.AnnotationNeverReady: "true"}
	}}, mutate...)...)
	c := newClockedReconciler(t, r, ms)
	// The step (the model fetched, the pod not ready) is held 10 s, then
	// written.
	pod := runningServingPod(t, ms, func() { c.reconcile(time.Now()) })
	c.reconcile(c.clock.Now())
	c.reconcile(c.clock.Now().Add(11 * time.Second))
	fetched := meta.FindStatusCondition(c.get().Status.Conditions, servingv1alpha1.ConditionModelFetched)
	if fetched == nil || fetched.Status != metav1.ConditionTrue {
		t.Fatalf("ModelFetched %+v after the step's hold", fetched)
	}
	c.since = fetched.LastTransitionTime.Time
	return c, pod
}

// clockedReconciler reconciles one ModelServer by hand, at the times it
// is told, counting its reads of the serving pods.
type clockedReconciler struct {
	t     *testing.T
	r     *controllers.ModelServerReconciler
	clock *clocktesting.FakePassiveClock
	reads *servingPodReads
	// events are the reconciler's, if it records them for the test.
	events *recordedEvents
	key    client.ObjectKey
	// since is the time expect counts from.
	since time.Time
}

func newClockedReconciler(t *testing.T, r *controllers.ModelServerReconciler, ms *servingv1alpha1.ModelServer) *clockedReconciler {
	c := &clockedReconciler{
		t: t, r: r, clock: clocktesting.NewFakePassiveClock(time.Now()),
		reads: &servingPodReads{Reader: r.APIReader}, key: client.ObjectKeyFromObject(ms),
	}
	r.APIReader, r.Clock = c.reads, c.clock
	c.events, _ = r.Recorder.(*recordedEvents)
	return c
}

func (c *clockedReconciler) reconcile(at time.Time) ctrl.Result {
	c.t.Helper()
	c.clock.SetTime(at)
	result, err := c.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: c.key})
	if err != nil {
		c.t.Fatal(err)
	}
	return result
}

// reconcileUntilReady reconciles, at the time it is, until the status
// says Ready.
func (c *clockedReconciler) reconcileUntilReady() {
	c.t.Helper()
	eventually(c.t, 60*time.Second, c.key.Name+" Ready", func(context.Context) (bool, string) {
		c.reconcile(time.Now())
		got := c.get()
		return got.Status.Phase == servingv1alpha1.PhaseReady, string(got.Status.Phase) + ": " + got.Status.Message
	})
}

func (c *clockedReconciler) get() *servingv1alpha1.ModelServer {
	c.t.Helper()
	got := &servingv1alpha1.ModelServer{}
	if err := env.client.Get(context.Background(), c.key, got); err != nil {
		c.t.Fatal(err)
	}
	return got
}

// expect reconciles at since+after and fails the test unless the serving
// pods have been read reads times by then and the next look is due in
// next. The status keeps a condition's time to the second, the
// reconciler to the nanosecond: both are checked give or take a second.
func (c *clockedReconciler) expect(after time.Duration, reads int32, next time.Duration) {
	c.t.Helper()
	result := c.reconcile(c.since.Add(after))
	if n := c.reads.n.Load(); n != reads || !about(result.RequeueAfter, next) {
		c.t.Fatalf("%v after the model came: %d reads of the serving pods, look again in %v; want %d, in %v", after, n, result.RequeueAfter, reads, next)
	}
}

// runningServingPod waits, calling poll meanwhile, for the model to be
// fetched and a serving pod of ms to run.
func runningServingPod(t *testing.T, ms *servingv1alpha1.ModelServer, poll func()) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	mine := client.MatchingLabels{values.LabelModelServer: ms.Name}
	eventually(t, 60*time.Second, "the model fetched and a serving pod running", func(ctx context.Context) (bool, string) {
		poll()
		pods, jobs := &corev1.PodList{}, &batchv1.JobList{}
		if err := env.client.List(ctx, pods, client.InNamespace(ms.Namespace), mine, client.MatchingLabels{values.LabelComponent: "serving"}); err != nil {
			return false, err.Error()
		}
		if err := env.client.List(ctx, jobs, client.InNamespace(ms.Namespace), mine); err != nil {
			return false, err.Error()
		}
		fetched := len(jobs.Items) == 1 && jobs.Items[0].Status.Succeeded == 1
		running := slices.IndexFunc(pods.Items, func(p corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
		if running >= 0 {
			pod = &pods.Items[running]
		}
		return running >= 0 && fetched, fmt.Sprintf("%d serving pods, running at %d; fetched %v", len(pods.Items), running, fetched)
	})
	return pod
}

// setContainerState writes the pod's one container's state, as the
// kubelet would: ready once it runs.
func setContainerState(t *testing.T, pod *corev1.Pod, state corev1.ContainerState) {
	t.Helper()
	ctx := context.Background()
	ready := corev1.ConditionFalse
	if state.Running != nil {
		ready = corev1.ConditionTrue
	}
	// The control plane may write the pod's status meanwhile (seen once
	// right after a binding): write again over the newest.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if len(pod.Status.ContainerStatuses) == 0 {
			pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: pod.Spec.Containers[0].Name, Image: pod.Spec.Containers[0].Image}}
		}
		pod.Status.ContainerStatuses[0].State = state
		pod.Status.ContainerStatuses[0].Ready = ready == corev1.ConditionTrue
		for i, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
				pod.Status.Conditions[i].Status = ready
			}
		}
		err := env.client.Status().Update(ctx, pod)
		if apierrors.IsConflict(err) {
			if getErr := env.client.Get(ctx, client.ObjectKeyFromObject(pod), pod); getErr != nil {
				return getErr
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// about says d is want give or take a second.
func about(d, want time.Duration) bool { return d >= want-time.Second && d <= want+time.Second }

// servingPodReads counts the lists of serving pods (not a fetch Job's),
// of pods' Events, and of Jobs' Events.
type servingPodReads struct {
	client.Reader
	n, events, jobEvents atomic.Int32
	// gets counts the reads of one pod, as of a fetch pod.
	gets atomic.Int32
}

func (s *servingPodReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.Pod); ok {
		s.gets.Add(1)
	}
	return s.Reader.Get(ctx, key, obj, opts...)
}

func (s *servingPodReads) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	switch list.(type) {
	case *corev1.PodList:
		if o.LabelSelector != nil && !strings.Contains(o.LabelSelector.String(), batchv1.JobNameLabel) {
			s.n.Add(1)
		}
	case *corev1.EventList:
		if o.FieldSelector != nil && strings.Contains(o.FieldSelector.String(), "involvedObject.kind=Pod") {
			s.events.Add(1)
		}
		if o.FieldSelector != nil && strings.Contains(o.FieldSelector.String(), "involvedObject.kind=Job") {
			s.jobEvents.Add(1)
		}
	}
	return s.Reader.List(ctx, list, opts...)
}

// A Ready ModelServer that loses a pod to a crash loop is Degraded at
// once, and says why once the pod has been lost for 30 s: the rollout
// that made it Ready, long before, does not count as a step forward.
func TestAServingPodLostToACrashLoopIsNamedInTheDegradedStatus(t *testing.T) {
	_, r, _ := recordingReconciler(t)
	ms := createUnmanaged(t, "crashing")
	ns := ms.Namespace
	c := newClockedReconciler(t, r, ms)
	c.reconcileUntilReady()

	pods := servingPods(t, ns, ms.Name)
	if len(pods) != 2 {
		t.Fatalf("%d serving pods, want 2", len(pods))
	}
	// The Deployment is available once its pods have stayed ready for its
	// minReadySeconds, after Ready: the pod is lost after that.
	availability := func(want corev1.ConditionStatus) {
		eventually(t, 30*time.Second, "the Deployment's Available condition "+string(want), func(ctx context.Context) (bool, string) {
			d := &appsv1.Deployment{}
			if err := env.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: names.Deployment(ms.Name)}, d); err != nil {
				return false, err.Error()
			}
			for _, cond := range d.Status.Conditions {
				if cond.Type == appsv1.DeploymentAvailable && cond.Status == want {
					c.since = cond.LastTransitionTime.Time
					return true, ""
				}
			}
			return false, fmt.Sprintf("%d ready, %d available", d.Status.ReadyReplicas, d.Status.AvailableReplicas)
		})
	}
	availability(corev1.ConditionTrue)
	pod := &pods[0]
	pod.Status.ContainerStatuses[0].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}
	setContainerState(t, pod, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}})
	availability(corev1.ConditionFalse)
	c.expect(time.Second, 0, 29*time.Second)
	if got := c.get(); got.Status.Phase != servingv1alpha1.PhaseDegraded {
		t.Fatalf("%s: %s; want Degraded at once", got.Status.Phase, got.Status.Message)
	}
	c.expect(31*time.Second, 1, time.Minute)
	got := c.get()
	want := fmt.Sprintf("; 1 serving pod cannot keep container %q running: it exits with code 137 (OOMKilled: over its memory limit)", pod.Spec.Containers[0].Name)
	if got.Status.Phase != servingv1alpha1.PhaseDegraded || !strings.HasSuffix(got.Status.Message, want) {
		t.Errorf("%s: %q; want Degraded, ending with %q", got.Status.Phase, got.Status.Message, want)
	}
	c.expectStalledWarning(strings.TrimPrefix(want, "; "))
}

// A Degraded ModelServer whose lost pod is ready again for a moment only,
// as a kubelet with kubernetes#136047 reports a container its liveness
// probe restarted, stays Degraded, with no Event; pods that stay ready
// make it Ready 10 s after they were first seen so (recoveryHold), with
// one Event. The phase gauge says what the status says meanwhile.
func TestAPodReadyForAMomentLeavesADegradedModelServerDegraded(t *testing.T) {
	_, r, _ := recordingReconciler(t)
	ms := createUnmanaged(t, "flashing", func(ms *servingv1alpha1.ModelServer) { ms.Spec.Replicas = ptr.To[int32](1) })
	c := newClockedReconciler(t, r, ms)
	c.reconcileUntilReady()
	pods := servingPods(t, ms.Namespace, ms.Name)
	if len(pods) != 1 {
		t.Fatalf("%d serving pods, want 1", len(pods))
	}
	pod := &pods[0]
	running := pod.Status.ContainerStatuses[0].State
	degraded := map[string]string{"phase": string(servingv1alpha1.PhaseDegraded)}
	before := gather(t).value("modelserver_modelservers", degraded)
	readyEvents := c.events.count(string(servingv1alpha1.PhaseReady))

	// setReady makes the pod's container ready or not and, once the
	// Deployment counts it, reconciles at the time given.
	setReady := func(ready bool, at time.Time) ctrl.Result {
		t.Helper()
		state, want := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}, int32(0)
		if ready {
			state, want = running, 1
		}
		setContainerState(t, pod, state)
		eventually(t, 30*time.Second, fmt.Sprintf("the Deployment with %d ready", want), func(ctx context.Context) (bool, string) {
			d := &appsv1.Deployment{}
			if err := env.client.Get(ctx, client.ObjectKey{Namespace: ms.Namespace, Name: names.Deployment(ms.Name)}, d); err != nil {
				return false, err.Error()
			}
			return d.Status.ReadyReplicas == want, fmt.Sprintf("%d ready", d.Status.ReadyReplicas)
		})
		return c.reconcile(at)
	}
	expect := func(when string, phase servingv1alpha1.Phase, gauge float64, events int) {
		t.Helper()
		got := c.get()
		if got.Status.Phase != phase {
			t.Errorf("%s: %s: %s; want %s", when, got.Status.Phase, got.Status.Message, phase)
		}
		if n := gather(t).value("modelserver_modelservers", degraded) - before; n != gauge {
			t.Errorf("%s: Degraded gauge up by %v, want %v", when, n, gauge)
		}
		if n := c.events.count(string(servingv1alpha1.PhaseDegraded)); n != events {
			t.Errorf("%s: %d Degraded Events, want %d", when, n, events)
		}
	}

	t0 := time.Now()
	setReady(false, t0)
	expect("the pod lost", servingv1alpha1.PhaseDegraded, 1, 1)
	if result := setReady(true, t0.Add(5*time.Second)); !about(result.RequeueAfter, 10*time.Second) {
		t.Errorf("the pod ready again: look again in %v, want 10s", result.RequeueAfter)
	}
	expect("the pod ready for a moment", servingv1alpha1.PhaseDegraded, 1, 1)
	setReady(false, t0.Add(8*time.Second))
	expect("the pod lost again", servingv1alpha1.PhaseDegraded, 1, 1)
	setReady(true, t0.Add(9*time.Second))
	c.reconcile(t0.Add(18500 * time.Millisecond))
	expect("the pod ready for 9.5 s", servingv1alpha1.PhaseDegraded, 1, 1)
	c.reconcile(t0.Add(19 * time.Second))
	expect("the pod ready for 10 s", servingv1alpha1.PhaseReady, 0, 1)
	if n := c.events.count(string(servingv1alpha1.PhaseReady)) - readyEvents; n != 1 {
		t.Errorf("%d Ready Events for the recovery, want 1", n)
	}
}

// expectStalledWarning fails unless the reconciler recorded exactly one
// RolloutStalled Warning, and it says problem.
func (c *clockedReconciler) expectStalledWarning(problem string) {
	c.t.Helper()
	var notes []string
	for _, e := range c.events.all() {
		if e.reason == "RolloutStalled" {
			notes = append(notes, e.kind+": "+e.note)
		}
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "Warning: Serving pods not ready, with no progress for 30s: "+problem) {
		c.t.Errorf("RolloutStalled Events: %q; want one Warning saying %q", notes, problem)
	}
}
