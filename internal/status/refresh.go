package status

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// Rounds maps each of spec's models to the refresh round the status as
// it was holds for it: the round its fetch generation is in.
func Rounds(old servingv1alpha1.ModelServerStatus, spec *values.Spec) map[string]time.Time {
	rounds := map[string]time.Time{}
	for name, st := range previousByName(old, spec) {
		if st.Refresh != nil {
			rounds[name] = st.Refresh.Round.Time
		}
	}
	return rounds
}

// inRound tells of model m's refresh round in mf, which foregroundFetch
// made as for any new generation. A round's fetch of the inputs the copy
// served was fetched with is a refresh: it runs in the background, and
// what it says is the refresh's state, while the model's fetch state
// stays that of the copy served.
func inRound(mf *ModelFetch, m values.SpecModel, was servingv1alpha1.ModelStatus) {
	if m.Round.IsZero() && was.Refresh == nil {
		// Refresh was asked for while a fetch runs: its rounds begin
		// once that fetch has ended.
		return
	}
	st := &mf.Status
	r := &servingv1alpha1.ModelRefresh{}
	if was.Refresh != nil {
		r = was.Refresh.DeepCopy()
	}
	r.Round, r.NextRound = metav1.NewTime(m.Round), nil
	if interval := m.RefreshInterval(); interval > 0 && !m.Round.IsZero() {
		r.NextRound = &metav1.Time{Time: m.Round.Add(interval)}
	}
	st.Refresh = r
	if !refreshing(was, m) {
		if mf.NewlyFetched {
			// Fetched in the foreground (a first fetch, a new URI): the
			// copy the next rounds refresh.
			r.BaseGeneration, r.State, r.Message = m.BaseGeneration, "", ""
		}
		return
	}
	mf.Refreshing = true
	switch {
	case mf.NewlyFetched:
		r.BaseGeneration, r.State, r.Message = m.BaseGeneration, servingv1alpha1.RefreshUpdated, ""
		if st.ServedGeneration != "" {
			r.State = servingv1alpha1.RefreshUnchanged
		}
		return
	case mf.State == FetchFailed:
		told := was.Refresh != nil && was.Refresh.Round.Time.Equal(m.Round) && was.Refresh.State == servingv1alpha1.RefreshFailed
		r.State, r.Message, mf.NewlyFailed = servingv1alpha1.RefreshFailed, mf.Reason+": "+mf.Message, !told
	default:
		r.State, r.Message = servingv1alpha1.RefreshRunning, ""
	}
	// The copy served was fetched, and is what the model's fetch state
	// tells of.
	st.Fetch, st.Message = string(FetchSucceeded), ""
}

// refreshing says that a fetch of model m, whose status was was, is a
// refresh of the copy served: a later round of the inputs that copy was
// fetched with.
func refreshing(was servingv1alpha1.ModelStatus, m values.SpecModel) bool {
	return servedFrom(was) != "" && was.FetchedGeneration != m.Generation && fetchedInputs(was) == m.BaseGeneration
}

// fetchedInputs identifies the inputs, all but the round, of the newest
// copy fetched for a model of this status.
func fetchedInputs(st servingv1alpha1.ModelStatus) string {
	if st.Refresh != nil && st.Refresh.BaseGeneration != "" {
		return st.Refresh.BaseGeneration
	}
	// Fetched before the model had rounds: its generation is its inputs'.
	return st.FetchedGeneration
}

// refreshWarnings are the warnings of the refresh rounds that failed: the
// model served stays, and the ModelServer Ready, so they are told here.
func refreshWarnings(o Observation) []string {
	var out []string
	for _, m := range o.Models {
		if !m.Refreshing || m.State != FetchFailed {
			continue
		}
		next := ""
		if r := m.Status.Refresh; r.NextRound != nil {
			next = ", and the next round is due at " + formatTime(*r.NextRound)
		}
		out = append(out, oneLine(fmt.Sprintf("%s.refreshInterval: the refresh round begun at %s failed (%s): %s; the model fetched before is still served%s",
			m.Field, formatTime(m.Status.Refresh.Round), m.Reason, m.Message, next)))
	}
	return out
}

// refreshRoll says the pods are being rolled onto what a refresh round
// fetched, and nothing else of the spec: the ModelServer was Ready at
// this generation, and some model's round found a new model, or the roll
// onto what one found goes on. Such a roll keeps the ModelServer Ready
// while enough pods are, as a roll that replaces its pods one at a time,
// keeping every old one until a new one is ready, does.
//
// The roll goes on past its round: the next round may begin, and end,
// before the new pods are ready (a model that loads for longer than the
// interval), and its state then says nothing of the roll.
func refreshRoll(old servingv1alpha1.ModelServerStatus, o Observation) bool {
	c := meta.FindStatusCondition(old.Conditions, servingv1alpha1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != o.Generation {
		return false
	}
	if a := meta.FindStatusCondition(old.Conditions, servingv1alpha1.ConditionAvailable); a != nil &&
		a.Reason == servingv1alpha1.ReasonRollingOntoRefreshedModel && a.ObservedGeneration == o.Generation {
		return true
	}
	for _, m := range o.Models {
		if r := m.Status.Refresh; r != nil && r.State == servingv1alpha1.RefreshUpdated {
			return true
		}
	}
	return false
}

func formatTime(t metav1.Time) string {
	if t.IsZero() {
		return "an unknown time"
	}
	return t.UTC().Format(time.RFC3339)
}
