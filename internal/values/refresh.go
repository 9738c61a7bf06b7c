package values

import (
	"strings"
	"time"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/names"
	"github.com/modelserver-dev/modelserver-operator/internal/storageuri"
)

// A model with a refreshInterval is fetched again each interval, in
// rounds. A round is part of the model's fetch generation, so that each
// round is a Job and a copy of its own, beside the one served, exactly as
// a new storageUri would be; what makes a round a refresh rather than a
// change is that its other inputs are those the served copy was fetched
// with (ModelRefresh.BaseGeneration).
//
// The round in force is kept in the status, not derived from the clock
// alone, so that a round whose fetch outlasts the interval is not
// abandoned for the next one: a round begins only once the fetch of the
// last has ended.

// InRound puts model i's fetch in the refresh round that began at round:
// its generation becomes that of its inputs and the round, and its Job
// that generation's. A zero round leaves it as the spec alone makes it.
func (s *Spec) InRound(i int, round time.Time) {
	m := &s.Models[i]
	m.Round = round
	m.Generation = m.BaseGeneration
	if !round.IsZero() {
		m.Generation = names.Hash(m.BaseGeneration, "refresh-round", round.UTC().Format(time.RFC3339))
	}
	m.FetchJob = names.FetchJob(s.ms.Name, m.Generation)
}

// RefreshInterval is how often model m is fetched again, 0 for never.
func (m SpecModel) RefreshInterval() time.Duration {
	if m.ModelSpec.RefreshInterval == nil {
		return 0
	}
	return m.ModelSpec.RefreshInterval.Duration
}

// DueRound is the refresh round that should be in force at now for a
// model refreshed every interval, whose round in force began at last (zero:
// none yet): the newest round begun by now, rounds beginning at created
// plus a whole number of intervals; or last, while its interval has not
// passed. The anchor spreads the rounds of ModelServers made at different
// times, rather than sending them all to their stores at once.
func DueRound(created, last, now time.Time, interval time.Duration) time.Time {
	if interval <= 0 || (!last.IsZero() && now.Before(last.Add(interval))) {
		return last
	}
	if now.Before(created) {
		return created
	}
	return created.Add(now.Sub(created) / interval * interval).Truncate(time.Second)
}

// refreshRefused says why model m, at loc, cannot be refreshed, or "".
func refreshRefused(m servingv1alpha1.ModelSpec, loc storageuri.Location) string {
	switch {
	case m.RefreshInterval == nil:
		return ""
	case loc.Scheme == storageuri.SchemePVC:
		return "a pvc:// model is served from its claim in place, where TensorFlow Serving finds new versions itself: remove refreshInterval"
	case loc.SHA256 != "" || strings.Contains(loc.Reference, "@"):
		return "the storageUri pins the model's digest, so every round would fetch the same model: remove refreshInterval, or the pin"
	}
	return ""
}
