package controllers_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/status"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// A busy Job controller marks a Job complete seconds after its pod has
// exited; the model is in place from the pod's exit, and the ModelServer
// says so then. Here the Job controller cannot write the Job's status at
// all, so the ModelServer can only become Ready from what its pod says.
func TestAFetchIsDoneWhenItsPodSucceedsBeforeTheJobSaysSo(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	holdJobStatus(t, ns)

	ms := newModelServer(ns, "early")
	if err := env.client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	got := waitReady(t, ms)

	jobs := &batchv1.JobList{}
	if err := env.client.List(ctx, jobs, client.InNamespace(ns), client.MatchingLabels{values.LabelComponent: values.ComponentFetch}); err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 1 {
		t.Fatalf("%d fetch Jobs, want 1", len(jobs.Items))
	}
	if s := status.FetchStateOf(&jobs.Items[0]); s != status.FetchRunning {
		t.Fatalf("the fetch Job's conditions say %s: the Job controller was not held, so this test shows nothing", s)
	}
	if m := got.Status.Model; m == nil || m.Fetch != string(status.FetchSucceeded) || m.FetchedGeneration == "" {
		t.Errorf("status.model = %+v, want the fetch succeeded", m)
	}
	// A later reconcile, woken here by a label on the Service, still sees
	// only the pod's word, and must not take the fetch back.
	svc := get(t, ns, "early", &corev1.Service{})
	patch := client.MergeFrom(svc.DeepCopy())
	svc.Labels["example.com/poke"] = "1"
	if err := env.client.Patch(ctx, svc, patch); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		time.Sleep(time.Second)
		if err := env.client.Get(ctx, client.ObjectKeyFromObject(ms), got); err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase != servingv1alpha1.PhaseReady {
			t.Fatalf("phase %s after Ready: %s", got.Status.Phase, got.Status.Message)
		}
	}
}

// holdJobStatus makes the apiserver refuse every write of a Job's status
// in ns, as long as the test runs: the Job controller then creates a Job's
// pod but never records what became of it.
func holdJobStatus(t *testing.T, ns string) {
	t.Helper()
	const heldMessage = "Job status held by the test"
	ctx := context.Background()
	name := "hold-job-status-" + ns
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptrTo(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
						Rule: admissionregistrationv1.Rule{
							APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs/status"},
						},
					},
				}},
			},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: heldMessage}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	for _, obj := range []client.Object{policy, binding} {
		if err := env.client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := env.client.Delete(context.Background(), obj); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("remove %s: %v", obj.GetName(), err)
			}
		})
	}

	// The apiserver takes a moment to apply a new policy. A Job that the
	// Job controller leaves alone shows when it does.
	probe := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"},
		Spec: batchv1.JobSpec{
			ManagedBy: ptrTo("example.com/nobody"),
			Suspend:   ptrTo(true),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "c", Image: "example.com/none"}},
			}},
		},
	}
	if err := env.client.Create(ctx, probe); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the policy holding Job status", func(ctx context.Context) (bool, string) {
		// Admission sees even an empty patch.
		err := env.client.Status().Patch(ctx, probe, client.RawPatch(types.MergePatchType, []byte("{}")))
		if err == nil {
			return false, "a status write was let through"
		}
		return strings.Contains(err.Error(), heldMessage), err.Error()
	})
	if err := env.client.Delete(ctx, probe, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
}

// A fetch pod that no node can take leaves its ModelServer Fetching; once
// it has stood Pending for 30 s, the status says why in the scheduler's
// words (written after the 10 s every step on the way is held), and a
// Warning says it once. That costs no request: the cache holds what the
// pod's status says. Once a node can take it, the words go.
func TestAFetchPodNoNodeCanTakeIsNamedAfterItsGrace(t *testing.T) {
	const pool = "fetch-test"
	_, r, _ := recordingReconciler(t)
	ms := createUnmanaged(t, "nowhere", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.PodTemplate.NodeSelector = map[string]string{"example.com/pool": pool}
	})
	c := newClockedReconciler(t, r, ms)

	unschedulable := map[string]string{"cause": status.CauseUnschedulable}
	before := gather(t).value("modelserver_stalled_fetches", unschedulable)

	// The release makes the Job, the Job controller its pod, and the
	// scheduler finds no node for it, once its claim is bound: until then
	// it says the claim is unbound, which is a wait.
	pod := unschedulableFetchPod(t, c, ms, "node affinity/selector")
	c.since = pod.CreationTimestamp.Time
	// The reconciler's cache may not have the pod's condition yet.
	eventually(t, 30*time.Second, "a look again at the pod's grace", func(context.Context) (bool, string) {
		result := c.reconcile(c.since.Add(10 * time.Second))
		return about(result.RequeueAfter, 20*time.Second), fmt.Sprint("look again in ", result.RequeueAfter)
	})
	if got := c.get(); strings.Contains(got.Status.Message, "fetch pod") {
		t.Fatalf("10 s after the pod: %q; want nothing of the pod yet", got.Status.Message)
	}

	c.reconcile(c.since.Add(31 * time.Second))
	c.reconcile(c.since.Add(42 * time.Second))
	got := c.get()
	const want = "1 fetch pod cannot be scheduled: 0/"
	fetched := meta.FindStatusCondition(got.Status.Conditions, servingv1alpha1.ConditionModelFetched)
	if got.Status.Phase != servingv1alpha1.PhaseFetching || !strings.Contains(got.Status.Message, want) ||
		!strings.Contains(got.Status.Message, "node affinity/selector") || fetched == nil || !strings.Contains(fetched.Message, want) {
		t.Fatalf("42 s after the pod: %s: %q, ModelFetched %+v; want Fetching, saying %q... node affinity/selector", got.Status.Phase, got.Status.Message, fetched, want)
	}
	if n := gather(t).value("modelserver_stalled_fetches", unschedulable) - before; n != 1 {
		t.Errorf("stalled fetches%v up by %v, want 1", unschedulable, n)
	}
	if n := c.events.count("FetchPodNotStarted"); n != 1 || !strings.Contains(c.events.String(), "Model-fetch pod not started after 30s: "+want) {
		t.Errorf("%d FetchPodNotStarted Events, want 1 saying %q: %s", n, want, c.events)
	}
	c.reconcile(c.since.Add(5 * time.Minute))
	if again := c.get(); again.ResourceVersion != got.ResourceVersion || c.events.count("FetchPodNotStarted") != 1 {
		t.Errorf("5 min: status %q (was %q), %d Warnings; want no write and the one Warning", again.Status.Message, got.Status.Message, c.events.count("FetchPodNotStarted"))
	}
	if n, events, gets := c.reads.n.Load(), c.reads.events.Load(), c.reads.gets.Load(); n+events+gets != 0 {
		t.Errorf("%d pod lists, %d Event lists, %d pod reads; want none: the cache holds what the pod says", n, events, gets)
	}

	// A node joins the pool: the pod runs, the fetch ends, and nothing of
	// the pod's trouble is left.
	labelANode(t, "example.com/pool", pool)
	eventually(t, time.Minute, "nowhere Ready", func(context.Context) (bool, string) {
		c.reconcile(time.Now().Add(10 * time.Minute))
		got = c.get()
		return got.Status.Phase == servingv1alpha1.PhaseReady, string(got.Status.Phase) + ": " + got.Status.Message
	})
	if fetched := meta.FindStatusCondition(got.Status.Conditions, servingv1alpha1.ConditionModelFetched); strings.Contains(fetched.Message, "fetch pod") {
		t.Errorf("ModelFetched still says %q", fetched.Message)
	}
	if n := c.events.count("FetchPodNotStarted"); n != 1 {
		t.Errorf("%d FetchPodNotStarted Events, want still 1", n)
	}
	if n := gather(t).value("modelserver_stalled_fetches", unschedulable) - before; n != 0 {
		t.Errorf("stalled fetches%v up by %v once Ready, want 0", unschedulable, n)
	}
}

// unschedulableFetchPod reconciles ms until its fetch pod is there and
// the scheduler has found no node for it, saying because. A loaded
// scheduler can first say the pod's claim is unbound, and take seconds to
// try again once it is bound.
func unschedulableFetchPod(t *testing.T, c *clockedReconciler, ms *servingv1alpha1.ModelServer, because string) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	eventually(t, time.Minute, "an unschedulable fetch pod", func(ctx context.Context) (bool, string) {
		c.reconcile(time.Now())
		pods := &corev1.PodList{}
		if err := env.client.List(ctx, pods, client.InNamespace(ms.Namespace), client.MatchingLabels{
			values.LabelModelServer: ms.Name, values.LabelComponent: values.ComponentFetch,
		}); err != nil || len(pods.Items) != 1 {
			return false, fmt.Sprint(len(pods.Items), " fetch pods ", err)
		}
		pod = pods.Items[0]
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Reason == corev1.PodReasonUnschedulable && strings.Contains(cond.Message, because) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("conditions %+v", pod.Status.Conditions)
	})
	return &pod
}

// A fetch pod on a node that has started nothing says why only in the
// kubelet's Warning Events (a volume that does not mount). Once it has
// stood so for 30 s since it was scheduled they are read, one list for
// the pod, and the status and a Warning say the newest; they are read
// again after as long as it has stood, not at every reconcile. Once the
// pod runs, the words go.
func TestAFetchPodThatCannotMountItsVolumeIsNamedByItsWarning(t *testing.T) {
	_, r, _ := recordingReconciler(t)
	ms := createUnmanaged(t, "nomountfetch", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.PodTemplate.NodeSelector = map[string]string{"example.com/pool": "no-such-pool"}
	})
	c := newClockedReconciler(t, r, ms)
	pod := unschedulableFetchPod(t, c, ms, "node affinity/selector")
	c.since = pod.CreationTimestamp.Time
	warned := map[string]string{"cause": status.CausePodWarning}
	before := gather(t).value("modelserver_stalled_fetches", warned)

	// The pod goes to a node no kubelet runs, which then says, as a kubelet
	// would, that it is creating the pod's container and cannot mount its
	// volume. It is bound seconds after its creation, which its grace does
	// not count from.
	time.Sleep(3 * time.Second)
	bindToANodeWithoutKubelet(t, pod)
	c.since = status.ScheduledAt(pod) // its grace counts from then
	setContainerState(t, pod, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}})
	const mount = `MountVolume.SetUp failed for volume "model" : hostPath type check failed: /srv/models is not a directory`
	kubeletEvent(t, pod, pod.UID, "", corev1.EventTypeWarning, "FailedMount", mount)
	eventually(t, 30*time.Second, "a look again at the pod's grace", func(context.Context) (bool, string) {
		result := c.reconcile(c.since.Add(10 * time.Second))
		return about(result.RequeueAfter, 20*time.Second), fmt.Sprint("look again in ", result.RequeueAfter)
	})
	if n := c.reads.events.Load(); n != 0 {
		t.Fatalf("%d reads of the pod's Events 10 s after it; want none before its grace", n)
	}

	// Named at its grace, in the status as in the Warning: a fault is not
	// held as a step is.
	if result := c.reconcile(c.since.Add(31 * time.Second)); !about(result.RequeueAfter, time.Minute) {
		t.Errorf("31 s after the pod: look again in %v, want 60 s (its Events read again then)", result.RequeueAfter)
	}
	got := c.get()
	const want = "1 fetch pod cannot start: FailedMount: " + mount
	fetched := meta.FindStatusCondition(got.Status.Conditions, servingv1alpha1.ConditionModelFetched)
	if got.Status.Phase != servingv1alpha1.PhaseFetching || !strings.HasSuffix(got.Status.Message, want) || fetched == nil || !strings.HasSuffix(fetched.Message, want) {
		t.Fatalf("31 s after the pod: %s: %q, ModelFetched %+v; want Fetching, ending %q", got.Status.Phase, got.Status.Message, fetched, want)
	}
	result := c.reconcile(c.since.Add(42 * time.Second))
	if n := c.events.count("FetchPodNotStarted"); n != 1 || !strings.Contains(c.events.String(), "Model-fetch pod not started after 30s: "+want) {
		t.Errorf("%d FetchPodNotStarted Events, want 1 saying %q: %s", n, want, c.events)
	}
	if n := gather(t).value("modelserver_stalled_fetches", warned) - before; n != 1 {
		t.Errorf("stalled fetches%v up by %v, want 1", warned, n)
	}
	if n := c.reads.events.Load(); n != 1 || !about(result.RequeueAfter, 49*time.Second) {
		t.Errorf("42 s after the pod: %d reads of its Events, look again in %v; want 1 (at 31 s), in 49 s (60 s after it)", n, result.RequeueAfter)
	}
	c.reconcile(c.since.Add(92 * time.Second))
	if again := c.get(); c.reads.events.Load() != 2 || again.ResourceVersion != got.ResourceVersion || c.events.count("FetchPodNotStarted") != 1 {
		t.Errorf("92 s: %d reads of the Events, status %q (was %q), %d Warnings; want 2 reads, no write and the one Warning",
			c.reads.events.Load(), again.Status.Message, got.Status.Message, c.events.count("FetchPodNotStarted"))
	}
	if n, gets := c.reads.n.Load(), c.reads.gets.Load(); n+gets != 0 {
		t.Errorf("%d pod lists, %d pod reads; want none: the cache holds what the pod says", n, gets)
	}

	// The volume mounts: the pod runs, and nothing of its trouble is left.
	pod.Status.Phase = corev1.PodRunning
	setContainerState(t, pod, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}})
	at := c.since.Add(2 * time.Minute)
	eventually(t, 30*time.Second, "the words gone", func(context.Context) (bool, string) {
		at = at.Add(11 * time.Second) // past the 10 s a step is held
		c.reconcile(at)
		got = c.get()
		return !strings.Contains(got.Status.Message, "fetch pod"), string(got.Status.Phase) + ": " + got.Status.Message
	})
	if fetched := meta.FindStatusCondition(got.Status.Conditions, servingv1alpha1.ConditionModelFetched); strings.Contains(fetched.Message, "fetch pod") {
		t.Errorf("ModelFetched still says %q", fetched.Message)
	}
	if n := c.reads.events.Load(); n != 2 {
		t.Errorf("%d reads of the Events; want still 2 once the pod runs", n)
	}
	if n := gather(t).value("modelserver_stalled_fetches", warned) - before; n != 0 {
		t.Errorf("stalled fetches%v up by %v once the pod runs, want 0", warned, n)
	}
}

// bindToANodeWithoutKubelet binds a pod the scheduler has left alone to a
// node that nothing manages (kwok takes only the nodes it is told to), so
// that the test can write the pod's status as a kubelet would. Both go
// when the test ends: a pod on a node without a kubelet is never deleted
// gracefully.
func bindToANodeWithoutKubelet(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "no-kubelet-" + string(pod.UID)[:8]},
		// No pod of another test may land on it.
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "example.com/no-kubelet", Effect: corev1.TaintEffectNoSchedule}}},
	}
	if err := env.client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.client.Delete(context.Background(), pod, client.GracePeriodSeconds(0))
		_ = env.client.Delete(context.Background(), node)
	})
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node.Name},
	}
	if err := env.client.SubResource("binding").Create(ctx, pod, binding); err != nil {
		t.Fatal(err)
	}
	if err := env.client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: pod.Spec.Containers[0].Name, Image: pod.Spec.Containers[0].Image}}
}

// labelANode labels one of the cluster's untainted nodes until the test
// ends.
func labelANode(t *testing.T, key, value string) {
	t.Helper()
	ctx := context.Background()
	nodes := &corev1.NodeList{}
	if err := env.client.List(ctx, nodes); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(nodes.Items, func(n corev1.Node) bool { return len(n.Spec.Taints) == 0 })
	if i < 0 {
		t.Fatalf("no untainted node among %d", len(nodes.Items))
	}
	node := &nodes.Items[i]
	patch := client.MergeFrom(node.DeepCopy())
	node.Labels[key] = value
	if err := env.client.Patch(ctx, node, patch); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		undo := client.MergeFrom(node.DeepCopy())
		delete(node.Labels, key)
		_ = env.client.Patch(context.Background(), node, undo)
	})
}

// A fetch Job still without a pod, and with no refusal in its Events (a
// Job controller that has not tried yet, its client's rate spent on a
// burst; here one the Job's suspension keeps from trying), is looked into
// at its grace, then again after as long as it has waited, not at every
// reconcile in between; and the next look is due whether or not anything
// wakes its ModelServer.
func TestAFetchJobStillWithoutAPodIsLookedIntoLessOftenAsItWaits(t *testing.T) {
	ns, r, _ := recordingReconciler(t)
	reads := &servingPodReads{Reader: r.APIReader}
	r.APIReader = reads
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "podless", Namespace: ns},
		Spec: batchv1.JobSpec{
			Suspend: ptrTo(true),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "fetch", Image: "example.com/fetcher:test"}},
			}},
		},
	}
	ctx := context.Background()
	if err := env.client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.client.Delete(context.Background(), job, client.PropagationPolicy(metav1.DeletePropagationBackground))
	})
	created := job.CreationTimestamp.Time
	const owner = types.UID("a-modelserver")
	for _, step := range []struct {
		at, lookAgainIn time.Duration
		lists           int32
	}{
		{5 * time.Second, 5 * time.Second, 0},   // within the grace
		{11 * time.Second, 11 * time.Second, 1}, // the grace passed: one look
		{15 * time.Second, 7 * time.Second, 1},  // woken by something else
		{22 * time.Second, 22 * time.Second, 2}, // due again
		{30 * time.Second, 14 * time.Second, 2},
		{44 * time.Second, 44 * time.Second, 3},
	} {
		refused, again, err := r.LookIntoRunningFetch(ctx, owner, job, created.Add(step.at))
		if err != nil {
			t.Fatal(err)
		}
		if n := reads.jobEvents.Load(); refused != "" || again != step.lookAgainIn || n != step.lists {
			t.Errorf("%s after the Job: refused %q, look again in %s, %d lists of its Events; want none, %s, %d",
				step.at, refused, again, n, step.lookAgainIn, step.lists)
		}
	}
}
