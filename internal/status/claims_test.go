package status

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func pendingClaim(annotations map[string]string, mutate ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "m-model", UID: "claim-1", Annotations: annotations},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}
	for _, m := range mutate {
		m(c)
	}
	return c
}

// A claim waits for a provisioner only once the PersistentVolume
// controller has named one on it; one whose class is missing, or bound,
// waits for none.
func TestAClaimWaitsForTheProvisionerNamedOnIt(t *testing.T) {
	named := map[string]string{annStorageProvisioner: "csi.example.com"}
	for name, tc := range map[string]struct {
		claim *corev1.PersistentVolumeClaim
		want  string
	}{
		"named":            {pendingClaim(named), "csi.example.com"},
		"named, beta only": {pendingClaim(map[string]string{annBetaStorageProvisioner: "old.example.com"}), "old.example.com"},
		"no class, none":   {pendingClaim(nil), ""},
		"bound":            {pendingClaim(named, func(c *corev1.PersistentVolumeClaim) { c.Status.Phase = corev1.ClaimBound }), ""},
		"being deleted":    {pendingClaim(named, func(c *corev1.PersistentVolumeClaim) { c.DeletionTimestamp = &metav1.Time{} }), ""},
	} {
		if got := provisionerOf(tc.claim); got != tc.want {
			t.Errorf("%s: provisioner %q, want %q", name, got, tc.want)
		}
	}
}

// A provisioner's failure said again is named in its own words; one said
// once (a write conflict it retries at once, as in a burst) is not; a
// provisioner silent for the grace is named as such.
func TestAClaimIsAProblemOnlyWhenItsProvisionerFailsAgainOrTakesTooLong(t *testing.T) {
	claim := pendingClaim(map[string]string{annStorageProvisioner: "csi.example.com"})
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	failed := func(msg string, count int32, at time.Time) corev1.Event {
		return corev1.Event{
			InvolvedObject: corev1.ObjectReference{Kind: "PersistentVolumeClaim", Name: claim.Name, UID: claim.UID},
			Type:           corev1.EventTypeWarning, Reason: reasonProvisioningFailed, Message: msg,
			Count: count, LastTimestamp: metav1.NewTime(at),
		}
	}
	const grace = 5 * time.Minute
	conflict := failed(`Error saving claim: Operation cannot be fulfilled on persistentvolumeclaims "m-model": the object has been modified`, 1, t0)
	if got := ProvisioningProblem(claim, []corev1.Event{conflict}, 40*time.Second, grace); got != "" {
		t.Errorf("one conflict, 40 s: %q, want nothing", got)
	}
	quota := failed("rpc error: code = ResourceExhausted desc = volume quota exceeded", 4, t0.Add(time.Second))
	older := failed("rpc error: code = Unavailable desc = connection refused", 2, t0)
	got := ProvisioningProblem(claim, []corev1.Event{older, quota, conflict}, 40*time.Second, grace)
	if want := `claim "m-model" cannot be provisioned by csi.example.com: rpc error: code = ResourceExhausted desc = volume quota exceeded`; got != want {
		t.Errorf("failures said again: %q, want the newest, %q", got, want)
	}
	series := quota
	series.Count, series.Series = 0, &corev1.EventSeries{Count: 3}
	if got := ProvisioningProblem(claim, []corev1.Event{series}, 40*time.Second, grace); !strings.Contains(got, "quota exceeded") {
		t.Errorf("a failure in an events.k8s.io series of 3: %q, want it named", got)
	}
	other := quota
	other.InvolvedObject.UID = "claim-2"
	if got := ProvisioningProblem(claim, []corev1.Event{other}, 40*time.Second, grace); got != "" {
		t.Errorf("another claim's failure: %q, want nothing", got)
	}
	if got := ProvisioningProblem(claim, nil, grace-time.Second, grace); got != "" {
		t.Errorf("silent, just under the grace: %q, want nothing", got)
	}
	want := `claim "m-model" is not bound: provisioner csi.example.com has made no volume for it, and reported no failure`
	if got := ProvisioningProblem(claim, []corev1.Event{conflict}, grace, grace); got != want {
		t.Errorf("silent for the grace: %q, want %q", got, want)
	}

	// No provisioner named: the PersistentVolume controller's own
	// failure, said at each of its resyncs, or its silence.
	orphan := pendingClaim(nil)
	noClass := failed(`storageclass.storage.k8s.io "fast" not found`, 2, t0)
	if got, want := ProvisioningProblem(orphan, []corev1.Event{noClass}, 31*time.Second, grace), `claim "m-model" cannot be provisioned: storageclass.storage.k8s.io "fast" not found`; got != want {
		t.Errorf("no such class: %q, want %q", got, want)
	}
	if got := ProvisioningProblem(orphan, nil, 31*time.Second, grace); got != "" {
		t.Errorf("not looked at yet, 31 s: %q, want nothing", got)
	}
	if got, want := ProvisioningProblem(orphan, nil, grace, grace), `claim "m-model" is not bound, and no provisioner has taken it`; got != want {
		t.Errorf("not looked at, for the grace: %q, want %q", got, want)
	}
	pod := noClass
	pod.InvolvedObject.Kind = "Pod"
	if got := ProvisioningProblem(orphan, []corev1.Event{pod}, 31*time.Second, grace); got != "" {
		t.Errorf("a pod's Event of the claim's UID: %q, want nothing", got)
	}
}

// Fetch pods wait for their claims only while the scheduler's last word
// on each that it could not place is the unbound claim; any other word
// stands.
func TestPodsWaitForClaimsOnlyWhileTheSchedulerSaysSo(t *testing.T) {
	unschedulable := func(msg string) corev1.Pod {
		return corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg,
		}}}}
	}
	claim := unschedulable("0/5 nodes are available: pod has unbound immediate PersistentVolumeClaims. not found")
	selector := unschedulable("0/5 nodes are available: 5 node(s) didn't match Pod's node affinity/selector.")
	for name, tc := range map[string]struct {
		pods []corev1.Pod
		want int
	}{
		"its claim":                       {[]corev1.Pod{claim}, 1},
		"two, their claim":                {[]corev1.Pod{claim, claim}, 2},
		"its claim, a pod not yet looked": {[]corev1.Pod{claim, {Status: corev1.PodStatus{Phase: corev1.PodPending}}}, 1},
		"a nodeSelector":                  {[]corev1.Pod{selector}, 0},
		"one of each":                     {[]corev1.Pod{claim, selector}, 0},
		"none unschedulable":              {[]corev1.Pod{{Status: corev1.PodStatus{Phase: corev1.PodPending}}}, 0},
	} {
		if got := PodsWaitingForClaims(tc.pods); got != tc.want {
			t.Errorf("%s: %d, want %d", name, got, tc.want)
		}
	}
}
