package controllers

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

func TestOnlyStepsBetweenStepsOnTheWayToReadyAreHeld(t *testing.T) {
	deployed := []metav1.Condition{{Type: servingv1alpha1.ConditionDeployed, Status: metav1.ConditionTrue}}
	status := func(p servingv1alpha1.Phase, gen int64) servingv1alpha1.ModelServerStatus {
		return servingv1alpha1.ModelServerStatus{Phase: p, ObservedGeneration: gen, Conditions: deployed}
	}
	fetching, deploying := status(servingv1alpha1.PhaseFetching, 1), status(servingv1alpha1.PhaseDeploying, 1)
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

	var h heldSteps
	if got := h.hold("a", fetching, deploying, false, t0); got != progressHold {
		t.Errorf("the fetch's end first seen: held %s, want %s", got, progressHold)
	}
	if got := h.hold("a", fetching, deploying, false, t0.Add(3*time.Second)); got != progressHold-3*time.Second {
		t.Errorf("3 s later: held %s more, want %s", got, progressHold-3*time.Second)
	}
	if got := h.hold("a", fetching, deploying, false, t0.Add(progressHold)); got != 0 {
		t.Errorf("after the hold: held %s more, want it written", got)
	}
	if got := h.hold("d", fetching, fetching, false, t0); got != progressHold {
		t.Errorf("a change within Fetching: held %s, want %s", got, progressHold)
	}
	if got := h.hold("d", fetching, fetching, true, t0.Add(time.Second)); got != 0 {
		t.Errorf("a fetch pod that cannot start named, or a fetch's progress just read: held %s, want it written at once", got)
	}
	for name, tc := range map[string]struct {
		old, st servingv1alpha1.ModelServerStatus
	}{
		"a failure":        {fetching, status(servingv1alpha1.PhaseFailed, 1)},
		"a new generation": {status(servingv1alpha1.PhaseReady, 1), status(servingv1alpha1.PhaseFetching, 2)},
		"the first status": {servingv1alpha1.ModelServerStatus{}, fetching},
		"the release deployed": {
			servingv1alpha1.ModelServerStatus{Phase: servingv1alpha1.PhaseFetching, ObservedGeneration: 1}, fetching,
		},
	} {
		if got := h.hold("b", tc.old, tc.st, false, t0); got != 0 {
			t.Errorf("%s held for %s, want it written at once", name, got)
		}
	}
}

// A ModelServer whose pods were not all ready is written Ready only once
// they have stayed ready for readyHold, or recoveryHold once Degraded for
// pods lost: a kubelet that reports a new or restarted container ready
// for a moment (kubernetes#136047 for a restarted one) does not make it
// Ready, then Deploying or Degraded again. Ready reached with the pods
// ready all along is not held.
func TestReadyIsHeldUntilThePodsHaveStayedReady(t *testing.T) {
	status := func(p servingv1alpha1.Phase, gen int64, available metav1.ConditionStatus) servingv1alpha1.ModelServerStatus {
		return servingv1alpha1.ModelServerStatus{Phase: p, ObservedGeneration: gen, Conditions: []metav1.Condition{
			{Type: servingv1alpha1.ConditionDeployed, Status: metav1.ConditionTrue},
			{Type: servingv1alpha1.ConditionAvailable, Status: available},
		}}
	}
	lost, ready := status(servingv1alpha1.PhaseDegraded, 1, metav1.ConditionFalse), status(servingv1alpha1.PhaseReady, 1, metav1.ConditionTrue)
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

	var h heldSteps
	if got := h.hold("a", lost, ready, false, t0); got != recoveryHold {
		t.Errorf("lost pods ready again, first seen: held %s, want %s", got, recoveryHold)
	}
	// The pods lost again: the status computed is the one written, and
	// the hold is forgotten, as writeStatus does.
	h.forget("a")
	if got := h.hold("a", lost, ready, false, t0.Add(3*time.Second)); got != recoveryHold {
		t.Errorf("ready again after a flash: held %s, want %s from then", got, recoveryHold)
	}
	if got := h.hold("a", lost, ready, false, t0.Add(12*time.Second)); got != time.Second {
		t.Errorf("9 s later: held %s more, want 1s", got)
	}
	if got := h.hold("a", lost, ready, false, t0.Add(13*time.Second)); got != 0 {
		t.Errorf("after the hold: held %s more, want it written", got)
	}

	// A new ModelServer's first Ready, seen while the step before it was
	// itself held, is held from when Ready is first seen.
	fetching, deploying := status(servingv1alpha1.PhaseFetching, 1, metav1.ConditionFalse), status(servingv1alpha1.PhaseDeploying, 1, metav1.ConditionFalse)
	if got := h.hold("c", fetching, deploying, false, t0); got != progressHold {
		t.Errorf("the fetch's end first seen: held %s, want %s", got, progressHold)
	}
	if got := h.hold("c", fetching, ready, false, t0.Add(9*time.Second)); got != readyHold {
		t.Errorf("pods ready 9 s into the step's hold: held %s, want %s from then", got, readyHold)
	}
	if got := h.hold("c", fetching, ready, false, t0.Add(11*time.Second)); got != 0 {
		t.Errorf("2 s later: held %s more, want it written", got)
	}
	for name, tc := range map[string]struct {
		old, st servingv1alpha1.ModelServerStatus
		want    time.Duration
	}{
		"the first Ready, from Fetching":                  {fetching, ready, readyHold},
		"the first Ready, from Deploying":                 {deploying, ready, readyHold},
		"Ready with a new generation, pods not all ready": {lost, status(servingv1alpha1.PhaseReady, 2, metav1.ConditionTrue), readyHold},
		"Ready again after pods lost":                     {lost, ready, recoveryHold},
		"a failed fetch's Degraded, still serving":        {status(servingv1alpha1.PhaseDegraded, 1, metav1.ConditionTrue), ready, 0},
		"Ready again, a new generation":                   {ready, status(servingv1alpha1.PhaseReady, 2, metav1.ConditionTrue), 0},
		"pods lost":                                       {ready, lost, 0},
	} {
		if got := h.hold("b", tc.old, tc.st, false, t0); got != tc.want {
			t.Errorf("%s held for %s, want %s", name, got, tc.want)
		}
		h.forget("b")
	}
}

// An Event's note over the apiserver's limit of 1024 bytes is refused,
// and the Event with it: a note is cut to fit, on a character's boundary.
func TestAnEventNoteIsASentenceThatFitsTheApiserversLimit(t *testing.T) {
	if got := sentence("rollout %s", "stalled"); got != "Rollout stalled." {
		t.Errorf("%q, want %q", got, "Rollout stalled.")
	}
	for _, long := range []string{strings.Repeat("x", 2000), strings.Repeat("é", 700), strings.Repeat("x", 1024)} {
		got := sentence("%s", long)
		if len(got) > 1024 || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") || len(got) < 1020 {
			t.Errorf("a note of %d bytes became %d bytes (valid UTF-8 %v), ending %q; want at most 1024, cut with …",
				len(long), len(got), utf8.ValidString(got), got[max(0, len(got)-8):])
		}
	}
	if got := sentence("%s", strings.Repeat("x", 1022)); len(got) != 1023 || !strings.HasSuffix(got, "x.") {
		t.Errorf("a note that fits, with its full stop, became %d bytes ending %q", len(got), got[len(got)-4:])
	}
}
