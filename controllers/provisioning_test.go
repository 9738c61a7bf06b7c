package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// A fetch pod that waits for its claim's volume from a provisioner is not
// named at its 30 s grace: in a burst, a provisioner's queue takes
// minutes, and a Warning for each ModelServer would be a false alarm. A
// provisioner silent for 5 min is named as such, and one that fails again
// and again in its own words. The claim and its failures are read from
// the cache.
func TestAFetchPodWaitingForItsProvisionerIsNamedOnlyWhenTheProvisionerFailsOrIsSlow(t *testing.T) {
	const provisioner = "example.com/nobody"
	c, claim, class := waitingForAProvisioner(t, "slowclaim", provisioner)

	c.reconcile(c.since.Add(31 * time.Second))
	c.reconcile(c.since.Add(42 * time.Second))
	got := c.get()
	if strings.Contains(got.Status.Message, "fetch pod") || strings.Contains(got.Status.Message, "claim \"") || c.events.count("FetchPodNotStarted") != 0 {
		t.Errorf("42 s after the pod: %q, %d FetchPodNotStarted Warnings; want nothing said of the pod", got.Status.Message, c.events.count("FetchPodNotStarted"))
	}
	if result := c.reconcile(c.since.Add(2 * time.Minute)); !about(result.RequeueAfter, 3*time.Minute) {
		t.Errorf("2 min after the pod: look again in %v, want 3 min, at the 5 min grace's end (a failure said wakes the ModelServer)", result.RequeueAfter)
	}

	// Silent for 5 min: named, once.
	c.reconcile(c.since.Add(5*time.Minute + time.Second))
	c.reconcile(c.since.Add(5*time.Minute + 12*time.Second))
	got = c.get()
	slow := fmt.Sprintf("1 fetch pod cannot be scheduled: claim %q is not bound: provisioner %s has made no volume for it", claim.Name, provisioner)
	if got.Status.Phase != servingv1alpha1.PhaseFetching || !strings.Contains(got.Status.Message, slow) {
		t.Errorf("5 min after the pod: %s: %q; want Fetching, saying %q", got.Status.Phase, got.Status.Message, slow)
	}
	if n := c.events.count("FetchPodNotStarted"); n != 1 || !strings.Contains(c.events.String(), "Model-fetch pod not started after 5m0s: "+slow) {
		t.Errorf("%d FetchPodNotStarted Warnings, want 1 saying %q: %s", n, slow, c.events)
	}

	// The provisioner then fails, again and again; the next look names
	// its failure in a Warning of its own.
	const quota = "rpc error: code = ResourceExhausted desc = volume quota exceeded"
	provisionerWarning(t, claim, provisioner, quota)
	failed := fmt.Sprintf("1 fetch pod cannot be scheduled: claim %q cannot be provisioned by %s: %s", claim.Name, provisioner, quota)
	at := c.since.Add(6 * time.Minute)
	eventually(t, 30*time.Second, "the failure named", func(context.Context) (bool, string) {
		at = at.Add(11 * time.Second) // past the 10 s a step is held
		c.reconcile(at)
		got = c.get()
		return strings.Contains(got.Status.Message, failed), got.Status.Message
	})
	if n := c.events.count("FetchPodNotStarted"); n != 2 || !strings.Contains(c.events.String(), "Model-fetch pod not started after 5m0s: "+failed) {
		t.Errorf("%d FetchPodNotStarted Warnings, want 2, the second saying %q: %s", n, failed, c.events)
	}
	if n, events := c.reads.n.Load(), c.reads.events.Load(); n+events != 0 {
		t.Errorf("%d pod lists, %d lists of pods' Events; want none", n, events)
	}

	// An admin makes the volume by hand: the claim binds, the scheduler
	// places the pod, the fetch runs, and nothing of the claim is left.
	volumeFor(t, claim, class)
	eventually(t, time.Minute, "slowclaim Ready", func(context.Context) (bool, string) {
		at = at.Add(time.Second) // past the 2 s Ready is held
		c.reconcile(at)
		got = c.get()
		return got.Status.Phase == servingv1alpha1.PhaseReady, string(got.Status.Phase) + ": " + got.Status.Message
	})
	if n := c.events.count("FetchPodNotStarted"); n != 2 {
		t.Errorf("%d FetchPodNotStarted Warnings once Ready, want still 2: %s", n, c.events)
	}
}

// volumeFor makes a volume of class bound in advance to claim, for the
// test's life.
func volumeFor(t *testing.T, claim *corev1.PersistentVolumeClaim, class string) {
	t.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "by-hand-" + string(claim.UID)},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      claim.Spec.Resources.Requests,
			AccessModes:                   claim.Spec.AccessModes,
			StorageClassName:              class,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/" + claim.Name}},
			ClaimRef:                      &corev1.ObjectReference{Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID},
		},
	}
	if err := env.client.Create(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.client.Delete(context.Background(), pv) })
}

// A provisioner's failure said again and again is named at the fetch
// pod's 30 s grace, in the provisioner's words.
func TestAFetchPodWhoseProvisionerFailsIsNamedAfterItsGrace(t *testing.T) {
	const provisioner = "example.com/failing"
	c, claim, _ := waitingForAProvisioner(t, "failingclaim", provisioner)
	const invalid = `invalid parameter "iops": must be at most 16000`
	provisionerWarning(t, claim, provisioner, invalid)

	c.reconcile(c.since.Add(31 * time.Second))
	c.reconcile(c.since.Add(42 * time.Second))
	got := c.get()
	failed := fmt.Sprintf("1 fetch pod cannot be scheduled: claim %q cannot be provisioned by %s: %s", claim.Name, provisioner, invalid)
	if got.Status.Phase != servingv1alpha1.PhaseFetching || !strings.Contains(got.Status.Message, failed) {
		t.Errorf("42 s after the pod: %s: %q; want Fetching, saying %q", got.Status.Phase, got.Status.Message, failed)
	}
	if n := c.events.count("FetchPodNotStarted"); n != 1 || !strings.Contains(c.events.String(), "Model-fetch pod not started after 30s: "+failed) {
		t.Errorf("%d FetchPodNotStarted Warnings, want 1 saying %q: %s", n, failed, c.events)
	}
}

// A provisioner's failure wakes the ModelServer whose claim it is about:
// the operator's manager names it as soon as it is said, not at a later
// look, and finds it by the claim's UID among the cached Events.
func TestAProvisionersFailureWakesItsModelServer(t *testing.T) {
	ns := newNamespace(t)
	const provisioner = "example.com/failing-later"
	class := nobodyProvisions(t, ns+"-class", provisioner)
	ms := newModelServer(ns, "wokenbyfailure", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Storage.StorageClassName = ptrTo(class)
	})
	if err := env.client.Create(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	claim := claimHandedToAProvisioner(t, ms)
	// Another claim's failure, in the same namespace, is not this one's.
	other := claim.DeepCopy()
	other.Name, other.UID = "someone-elses", "4f1a7f0e-0000-4000-8000-000000000001"
	provisionerWarning(t, other, provisioner, "not ours")

	// Well past the fetch pod's 30 s grace, the wait is still a wait.
	var pod corev1.Pod
	eventually(t, time.Minute, "the fetch pod unschedulable for 35 s", func(ctx context.Context) (bool, string) {
		pods := &corev1.PodList{}
		if err := env.client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{values.LabelComponent: values.ComponentFetch}); err != nil || len(pods.Items) != 1 {
			return false, fmt.Sprint(len(pods.Items), " fetch pods ", err)
		}
		pod = pods.Items[0]
		return time.Since(pod.CreationTimestamp.Time) > 35*time.Second, "created " + pod.CreationTimestamp.String()
	})
	got := get(t, ns, ms.Name, &servingv1alpha1.ModelServer{})
	if got.Status.Phase != servingv1alpha1.PhaseFetching || strings.Contains(got.Status.Message, "claim") {
		t.Fatalf("35 s after the fetch pod: %s: %q; want Fetching, nothing said of the claim", got.Status.Phase, got.Status.Message)
	}

	// Named within seconds of being said: before, the next look came up to
	// 30 s later.
	const quota = "rpc error: code = ResourceExhausted desc = volume quota exceeded"
	provisionerWarning(t, claim, provisioner, quota)
	failed := fmt.Sprintf("1 fetch pod cannot be scheduled: claim %q cannot be provisioned by %s: %s", claim.Name, provisioner, quota)
	eventually(t, 10*time.Second, "the failure named", func(ctx context.Context) (bool, string) {
		if err := env.client.Get(ctx, client.ObjectKeyFromObject(ms), got); err != nil {
			return false, err.Error()
		}
		return strings.Contains(got.Status.Message, failed), string(got.Status.Phase) + ": " + got.Status.Message
	})
}

// waitingForAProvisioner creates a ModelServer name whose claim is of a
// class served by provisioner, which never runs, and reconciles it until
// its fetch pod is unschedulable and its claim handed to provisioner. The
// clock counts from the pod's creation.
func waitingForAProvisioner(t *testing.T, name, provisioner string) (*clockedReconciler, *corev1.PersistentVolumeClaim, string) {
	t.Helper()
	class := nobodyProvisions(t, name+"-class", provisioner)
	_, r, _ := recordingReconciler(t)
	ms := createUnmanaged(t, name, func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Storage.StorageClassName = ptrTo(class)
	})
	c := newClockedReconciler(t, r, ms)
	pod := unschedulableFetchPod(t, c, ms, "unbound immediate PersistentVolumeClaims")
	c.since = pod.CreationTimestamp.Time
	return c, claimHandedToAProvisioner(t, ms), class
}

// nobodyProvisions creates a StorageClass, binding at once, whose
// provisioner never runs, for the test's life.
func nobodyProvisions(t *testing.T, name, provisioner string) string {
	t.Helper()
	immediate := storagev1.VolumeBindingImmediate
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       provisioner,
		VolumeBindingMode: &immediate,
	}
	if err := env.client.Create(context.Background(), sc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.client.Delete(context.Background(), sc) })
	return sc.Name
}

// claimHandedToAProvisioner waits for the PersistentVolume controller to
// name the provisioner on ms's claim, and returns the claim.
func claimHandedToAProvisioner(t *testing.T, ms *servingv1alpha1.ModelServer) *corev1.PersistentVolumeClaim {
	t.Helper()
	var claim corev1.PersistentVolumeClaim
	eventually(t, 30*time.Second, "the claim handed to its provisioner", func(ctx context.Context) (bool, string) {
		claims := &corev1.PersistentVolumeClaimList{}
		if err := env.client.List(ctx, claims, client.InNamespace(ms.Namespace), client.MatchingLabels{values.LabelModelServer: ms.Name}); err != nil || len(claims.Items) != 1 {
			return false, fmt.Sprint(len(claims.Items), " claims ", err)
		}
		claim = claims.Items[0]
		return claim.Annotations["volume.kubernetes.io/storage-provisioner"] != "", fmt.Sprintf("annotations %v", claim.Annotations)
	})
	return &claim
}

// provisionerWarning records, as an external provisioner does at each
// failed try, a ProvisioningFailed Warning on claim, said three times.
func provisionerWarning(t *testing.T, claim *corev1.PersistentVolumeClaim, provisioner, message string) {
	t.Helper()
	event := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: claim.Namespace, GenerateName: claim.Name + "."},
		InvolvedObject: corev1.ObjectReference{
			Kind: "PersistentVolumeClaim", Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID, APIVersion: "v1",
		},
		Type: corev1.EventTypeWarning, Reason: "ProvisioningFailed", Message: message,
		Source:         corev1.EventSource{Component: provisioner},
		FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 3,
	}
	if err := env.client.Create(context.Background(), event); err != nil {
		t.Fatal(err)
	}
}
