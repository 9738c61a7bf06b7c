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

func TestAStalledRolloutIsCountedUnderOneCauseUntilItEnds(t *testing.T) {
	stalled := func(cause string) float64 { return value(t, stalledGauge.WithLabelValues(cause)) }
	Observe("stalled", 1, time.Now(), "Deploying", false)
	Stalled("stalled", status.CauseUnknown)
	Stalled("stalled", status.CauseImagePull)
	Stalled("stalled", status.CauseImagePull)
	if u, p := stalled(status.CauseUnknown), stalled(status.CauseImagePull); u != 0 || p != 1 {
		t.Errorf("Unknown %v, ImagePull %v after the cause was found; want 0, 1", u, p)
	}
	Stalled("stalled", "")
	Stalled("never-stalled", "")
	if p := stalled(status.CauseImagePull); p != 0 {
		t.Errorf("ImagePull %v once the rollout moved on, want 0", p)
	}
	Stalled("stalled", status.CauseCrashLoop)
	Forget("stalled")
	if c := stalled(status.CauseCrashLoop); c != 0 {
		t.Errorf("CrashLoop %v after the ModelServer was deleted, want 0", c)
	}
	for _, c := range status.Causes {
		if !strings.Contains(metricsDoc(t), "`"+c+"`") {
			t.Errorf("docs/metrics.md does not name the cause %s", c)
		}
	}
}

func TestAStalledFetchIsCountedUnderOneCauseUntilItsPodsStart(t *testing.T) {
	stalled := func(cause string) float64 { return value(t, stalledFetchGauge.WithLabelValues(cause)) }
	Observe("fetching", 1, time.Now(), "Fetching", false)
	StalledFetch("fetching", status.CauseUnschedulable)
	StalledFetch("fetching", status.CausePodWarning)
	StalledFetch("fetching", status.CausePodWarning)
	if u, w := stalled(status.CauseUnschedulable), stalled(status.CausePodWarning); u != 0 || w != 1 {
		t.Errorf("Unschedulable %v, PodWarning %v once the pod was scheduled and its volume did not mount; want 0, 1", u, w)
	}
	StalledFetch("fetching", "")
	StalledFetch("never-stalled", "")
	if w := stalled(status.CausePodWarning); w != 0 {
		t.Errorf("PodWarning %v once the pod started, want 0", w)
	}
	StalledFetch("fetching", status.CauseImagePull)
	Forget("fetching")
	if p := stalled(status.CauseImagePull); p != 0 {
		t.Errorf("ImagePull %v after the ModelServer was deleted, want 0", p)
	}
	if _, tracked := servers["never-stalled"]; tracked {
		t.Error("a ModelServer whose fetch never stalled is tracked for clearing it")
	}
	for _, c := range FetchCauses {
		if !strings.Contains(metricsDoc(t), "`"+c+"`") {
			t.Errorf("docs/metrics.md does not name the cause %s", c)
		}
	}
}

func TestAFetchIsCountedOnceHoweverOftenItsEndIsSeen(t *testing.T) {
	for range 3 {
		FetchEnded("ms", "job-1", true, 2*time.Second, 1000)
	}
	if got := value(t, fetchBytes); got != 1000 {
		t.Errorf("fetch bytes %v, want 1000", got)
	}
	// Two models of one ModelServer, their ends observed in turn.
	for range 3 {
		FetchEnded("ms", "job-2", true, time.Second, 500)
		FetchEnded("ms", "job-1", true, 2*time.Second, 1000)
	}
	if got := value(t, fetchBytes); got != 1500 {
		t.Errorf("fetch bytes %v after a second model's Job, want 1500", got)
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
