package metrics

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/types"

	"github.com/modelserver-dev/modelserver-operator/internal/status"
)

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func metricsDoc(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(doc)
}

func TestTheMetricsReferenceListsEveryMetric(t *testing.T) {
	doc := metricsDoc(t)
	for _, c := range collectors {
		ch := make(chan *prometheus.Desc, 10)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			m := fqName.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("no name in %s", d)
			}
			if !strings.Contains(doc, "| `"+m[1]+"` |") {
				t.Errorf("docs/metrics.md does not list %s", m[1])
			}
		}
	}
}

func TestAModelServerIsCountedInOnePhaseAtATime(t *testing.T) {
	uid := types.UID("phases")
	created := time.Now().Add(-3 * time.Second)
	var before dtoHistogram
	before.read(t, timeToReady)
	Observe(uid, 1, created, "Fetching", false)
	Observe(uid, 1, created, "Deploying", false)
	if got := value(t, phaseGauge.WithLabelValues("Fetching")); got != 0 {
		t.Errorf("Fetching = %v after moving on to Deploying, want 0", got)
	}
	Observe(uid, 1, created, "Ready", true)
	Observe(uid, 1, created, "Ready", true)
	if got := value(t, phaseGauge.WithLabelValues("Ready")); got != 1 {
		t.Errorf("Ready = %v, want 1", got)
	}
	var after dtoHistogram
	after.read(t, timeToReady)
	if n, took := after.count-before.count, after.sum-before.sum; n != 1 || took < 3 {
		t.Errorf("time to Ready: %d samples of %.1fs, want 1 of at least 3s", n, took)
	}
	Forget(uid)
	if got := value(t, phaseGauge.WithLabelValues("Ready")); got != 0 {
		t.Errorf("Ready = %v after the ModelServer was deleted, want 0", got)
	}
}

// A stalled rollout, or a fetch whose pods cannot start, counts a
// ModelServer under one cause at a time, until it moves on or is deleted.
func TestAStalledModelServerIsCountedUnderOneCauseUntilItMovesOn(t *testing.T) {
	for _, tc := range []struct {
		name              string
		gauge             *prometheus.GaugeVec
		set               func(types.UID, string)
		causes            []string
		first, then, last string
	}{
		{"rollout", stalledGauge, Stalled, status.Causes, status.CauseUnknown, status.CauseImagePull, status.CauseCrashLoop},
		{"fetch", stalledFetchGauge, StalledFetch, FetchCauses, status.CauseUnschedulable, status.CausePodWarning, status.CauseImagePull},
		{"slow fetch", slowFetchGauge, SlowFetch, status.SlowFetchCauses, status.SlowFetchOutOfTime, status.SlowFetchNothingReceived, status.SlowFetchOutOfTime},
		{"autoscaler", inactiveAutoscalerGauge, InactiveAutoscaler, status.AutoscalerCauses, status.AutoscalerCauseScale, status.AutoscalerCauseMetrics, status.AutoscalerCauseSelector},
	} {
		t.Run(tc.name, func(t *testing.T) {
			uid, never := types.UID("stalled-"+tc.name), types.UID("never-stalled-"+tc.name)
			stalled := func(cause string) float64 { return value(t, tc.gauge.WithLabelValues(cause)) }
			Observe(uid, 1, time.Now(), "Deploying", false)
			tc.set(uid, tc.first)
			tc.set(uid, tc.then)
			tc.set(uid, tc.then)
			if a, b := stalled(tc.first), stalled(tc.then); a != 0 || b != 1 {
				t.Errorf("%s %v, %s %v after the cause changed; want 0, 1", tc.first, a, tc.then, b)
			}
			tc.set(uid, "")
			tc.set(never, "")
			if b := stalled(tc.then); b != 0 {
				t.Errorf("%s %v once it moved on, want 0", tc.then, b)
			}
			if _, tracked := servers[never]; tracked {
				t.Error("a ModelServer that never stalled is tracked for clearing it")
			}
			tc.set(uid, tc.last)
			Forget(uid)
			if l := stalled(tc.last); l != 0 {
				t.Errorf("%s %v after the ModelServer was deleted, want 0", tc.last, l)
			}
			for _, c := range tc.causes {
				if !strings.Contains(metricsDoc(t), "`"+c+"`") {
					t.Errorf("docs/metrics.md does not name the cause %s", c)
				}
			}
		})
	}
}

// An autoscaler at its maximum, or a failed refresh round, counts its
// ModelServer once, until it is no more or the ModelServer is deleted.
func TestAFlagCountsItsModelServerOnce(t *testing.T) {
	for name, c := range map[string]struct {
		record func(types.UID, bool)
		gauge  prometheus.Gauge
	}{
		"at maximum":     {AutoscalerAtMaximum, atMaximumGauge},
		"failed refresh": {RefreshFailed, failedRefreshGauge},
	} {
		t.Run(name, func(t *testing.T) {
			uid, never := types.UID(name), types.UID("never "+name)
			c.record(uid, true)
			c.record(uid, true)
			if got := value(t, c.gauge); got != 1 {
				t.Errorf("%v counted, want 1", got)
			}
			c.record(uid, false)
			c.record(never, false)
			if got := value(t, c.gauge); got != 0 {
				t.Errorf("%v counted once it is no more, want 0", got)
			}
			if _, tracked := servers[never]; tracked {
				t.Error("a ModelServer never counted is tracked for clearing it")
			}
			c.record(uid, true)
			Forget(uid)
			if got := value(t, c.gauge); got != 0 {
				t.Errorf("%v counted after the ModelServer was deleted, want 0", got)
			}
		})
	}
}

func TestAFetchIsCountedOnceHoweverOftenItsEndIsSeen(t *testing.T) {
	for range 3 {
		FetchEnded("ms", "job-1", "", 2*time.Second, 1000)
	}
	if got := value(t, fetchBytes); got != 1000 {
		t.Errorf("fetch bytes %v, want 1000", got)
	}
	// Two models of one ModelServer, their ends observed in turn.
	for range 3 {
		FetchEnded("ms", "job-2", "", time.Second, 500)
		FetchEnded("ms", "job-1", "", 2*time.Second, 1000)
	}
	if got := value(t, fetchBytes); got != 1500 {
		t.Errorf("fetch bytes %v after a second model's Job, want 1500", got)
	}
	// A failure, by its reason.
	for range 3 {
		FetchEnded("ms", "job-3", "OutOfMemory", time.Second, -1)
	}
	if got := value(t, fetchFailures.WithLabelValues("OutOfMemory")); got != 1 {
		t.Errorf("%v fetch failures for OutOfMemory, want 1", got)
	}
	if got := value(t, fetchFailures.WithLabelValues("Timeout")); got != 0 {
		t.Errorf("%v fetch failures for Timeout, want 0", got)
	}
}

func TestAModelServerAlreadyReadyWhenFirstSeenIsNotTimed(t *testing.T) {
	var before dtoHistogram
	before.read(t, timeToReady)
	// An operator restarted long after this ModelServer became Ready.
	Observe("old", 1, time.Now().Add(-48*time.Hour), "Ready", true)
	var after dtoHistogram
	after.read(t, timeToReady)
	if after.count != before.count {
		t.Errorf("time to Ready recorded for a ModelServer that was Ready before this process saw it")
	}
	Forget("old")
}

// dtoHistogram is the sample count and sum of an unlabelled histogram.
type dtoHistogram struct {
	count uint64
	sum   float64
}

func (h *dtoHistogram) read(t *testing.T, c prometheus.Histogram) {
	t.Helper()
	m := &dto.Metric{}
	if err := c.Write(m); err != nil {
		t.Fatal(err)
	}
	h.count, h.sum = m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// value is a gauge's or counter's current value.
func value(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	m := &dto.Metric{}
	if err := c.Write(m); err != nil {
		t.Fatal(err)
	}
	if m.Gauge != nil {
		return m.GetGauge().GetValue()
	}
	return m.GetCounter().GetValue()
}
