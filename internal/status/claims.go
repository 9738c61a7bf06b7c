package status

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The annotations the PersistentVolume controller puts on a claim once it
// has handed it to a provisioner (the beta one for provisioners that read
// only it). A claim without them, Pending, waits for nothing that will
// come: its class does not exist, or has no provisioner.
const (
	annStorageProvisioner     = "volume.kubernetes.io/storage-provisioner"
	annBetaStorageProvisioner = "volume.beta.kubernetes.io/storage-provisioner"
)

// unboundClaim is what the scheduler says of a pod whose claim, binding
// at once, has no volume yet (the volume binding plugin's
// ErrReasonUnboundImmediatePVC).
const unboundClaim = "pod has unbound immediate PersistentVolumeClaims"

// PodsWaitingForClaims is how many of pods the scheduler has found no
// node for only because their claim has no volume yet, as it last said,
// which may be seconds behind the claim's binding in a busy scheduler's
// queue; 0 if it says anything else of any.
func PodsWaitingForClaims(pods []corev1.Pod) int {
	waiting := 0
	for i := range pods {
		for _, c := range pods[i].Status.Conditions {
			if c.Type != corev1.PodScheduled || c.Status != corev1.ConditionFalse || c.Reason != corev1.PodReasonUnschedulable {
				continue
			}
			if !strings.Contains(c.Message, unboundClaim) {
				return 0
			}
			waiting++
		}
	}
	return waiting
}

// reasonProvisioningFailed is the reason of the Warning a provisioner
// records on a claim at each failed try.
const reasonProvisioningFailed = "ProvisioningFailed"

// provisionerOf is the provisioner a Pending claim waits for, or "" if it
// waits for none (or is not Pending).
func provisionerOf(claim *corev1.PersistentVolumeClaim) string {
	if claim.Status.Phase != corev1.ClaimPending || claim.DeletionTimestamp != nil {
		return ""
	}
	if p := claim.Annotations[annStorageProvisioner]; p != "" {
		return p
	}
	return claim.Annotations[annBetaStorageProvisioner]
}

// ProvisioningFailedSelector selects the Events that say a claim's
// volume could not be made: the PersistentVolume controller's (no such
// class) or the provisioner's.
func ProvisioningFailedSelector() map[string]string {
	return map[string]string{"reason": reasonProvisioningFailed}
}

// ProvisioningProblem is what keeps claim, Pending, from being bound, as
// its ProvisioningFailed Warnings among events say; "" while nothing
// does. The PersistentVolume controller and provisioners try again after
// each failure, and one failure may be the last (a conflict on the
// claim's write, in a burst): only a failure said twice or more counts
// (SaysAClaimCannotBeProvisioned).
// A claim that has waited (as its fetch pods have) for grace without a
// word is named as slow; how long is the caller's to say.
func ProvisioningProblem(claim *corev1.PersistentVolumeClaim, events []corev1.Event, waited, grace time.Duration) string {
	provisioner := provisionerOf(claim)
	by := ""
	if provisioner != "" {
		by = " by " + provisioner
	}
	newest := newestEvent(claim.UID, events, SaysAClaimCannotBeProvisioned)
	switch {
	case newest != nil:
		return oneLine(withDetail(fmt.Sprintf("claim %q cannot be provisioned%s", claim.Name, by), newest.Message))
	case waited < grace:
		return ""
	case provisioner != "":
		return fmt.Sprintf("claim %q is not bound: provisioner %s has made no volume for it, and reported no failure", claim.Name, provisioner)
	}
	return fmt.Sprintf("claim %q is not bound, and no provisioner has taken it", claim.Name)
}

// SaysAClaimCannotBeProvisioned says e is a claim's ProvisioningFailed
// Warning said twice or more, which ProvisioningProblem names.
func SaysAClaimCannotBeProvisioned(e *corev1.Event) bool {
	return e.Reason == reasonProvisioningFailed && e.InvolvedObject.Kind == "PersistentVolumeClaim" && timesSaid(e) >= 2
}

// timesSaid is how often an Event was recorded, in either API's terms.
func timesSaid(e *corev1.Event) int32 {
	if e.Series != nil {
		return max(e.Series.Count, e.Count)
	}
	return max(e.Count, 1)
}
