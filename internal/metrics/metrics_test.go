package metrics

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/types"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

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
	seen := Seen{UID: uid, Namespace: "ml", Name: "phases", Generation: 1, ChangedAt: created}
	seen.Phase, seen.Reason = "Fetching", "WaitingForFetch"
	Observe(seen)
	seen.Phase, seen.Reason = "Deploying", "PodsNotReady"
	Observe(seen)
	if got := value(t, phaseGauge.WithLabelValues("Fetching")); got != 0 {
		t.Errorf("Fetching = %v after moving on to Deploying, want 0", got)
	}
	seen.Phase, seen.Reason, seen.Ready = "Ready", "Ready", true
	Observe(seen)
	Observe(seen)
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
			Observe(Seen{UID: uid, Namespace: "ml", Name: string(uid), Generation: 1, ChangedAt: time.Now(), Phase: "Deploying"})
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

// Each ModelServer has one series, of its phase and Ready reason, which
// follows it through its changes and is gone with it: an alert on a phase
// names the ModelServer, and ends when it moves on.
func TestEachModelServerHasOneSeriesOfItsPhase(t *testing.T) {
	series := func() []string { return seriesOf(t, "modelserver_status_phase", "serving") }
	a := Seen{UID: "a", Namespace: "serving", Name: "a", Generation: 1, Phase: "Fetching", Reason: "WaitingForFetch"}
	b := Seen{UID: "b", Namespace: "serving", Name: "b", Generation: 1, Phase: "Failed", Reason: "AccessDenied"}
	Observe(a)
	Observe(b)
	a.Phase, a.Reason = "Deploying", "PodsNotReady"
	Observe(a)
	Observe(a)
	want := []string{
		"name=a,namespace=serving,phase=Deploying,reason=PodsNotReady 1",
		"name=b,namespace=serving,phase=Failed,reason=AccessDenied 1",
	}
	if got := series(); !slices.Equal(got, want) {
		t.Errorf("series:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A reason that changes within a phase is a new series too.
	b.Reason = "NotFound"
	Observe(b)
	Forget(a.UID)
	want = []string{"name=b,namespace=serving,phase=Failed,reason=NotFound 1"}
	if got := series(); !slices.Equal(got, want) {
		t.Errorf("series after a change of reason and a deletion:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	Forget(b.UID)
	if got := series(); len(got) != 0 {
		t.Errorf("series after both were deleted: %v", got)
	}
}

// A ModelServer's objectives have a series of its name while they are
// set, which follows them and ends with them or the ModelServer.
func TestObjectivesHaveASeriesOfTheirModelServer(t *testing.T) {
	availability := func() []string { return seriesOf(t, "modelserver_availability_objective_ratio", "objectives") }
	latency := func() []string { return seriesOf(t, "modelserver_latency_objective_seconds", "objectives") }
	a := Seen{UID: "objective-a", Namespace: "objectives", Name: "a", Generation: 1, Phase: "Ready", Reason: "Ready", P99Latency: 250 * time.Millisecond}
	b := Seen{UID: "objective-b", Namespace: "objectives", Name: "b", Generation: 1, Phase: "Ready", Reason: "Ready", Availability: 0.999}
	Observe(a)
	Observe(b)
	if got, want := latency(), []string{"name=a,namespace=objectives 0.25"}; !slices.Equal(got, want) {
		t.Errorf("series %v, want %v", got, want)
	}
	if got, want := availability(), []string{"name=b,namespace=objectives 0.999"}; !slices.Equal(got, want) {
		t.Errorf("availability series %v, want %v", got, want)
	}
	a.Generation, a.P99Latency, a.Availability = 2, time.Second, 0.99
	b.Generation, b.P99Latency = 2, 100*time.Millisecond
	Observe(a)
	Observe(b)
	if got, want := latency(), []string{"name=a,namespace=objectives 1", "name=b,namespace=objectives 0.1"}; !slices.Equal(got, want) {
		t.Errorf("series after both changed %v, want %v", got, want)
	}
	if got, want := availability(), []string{"name=a,namespace=objectives 0.99", "name=b,namespace=objectives 0.999"}; !slices.Equal(got, want) {
		t.Errorf("availability series after both changed %v, want %v", got, want)
	}
	a.Generation, a.P99Latency, a.Availability = 3, 0, 0
	Observe(a)
	Forget(b.UID)
	if got := slices.Concat(latency(), availability()); len(got) != 0 {
		t.Errorf("series after one was unset and the other deleted: %v", got)
	}
	Forget(a.UID)
}

// Each problem a gauge counts has a series of the ModelServer that has it,
// from the first time its name is known, which follows its cause and ends
// with the problem or the ModelServer.
func TestEachProblemOfAModelServerHasASeriesOfItsName(t *testing.T) {
	series := func() []string { return seriesOf(t, "modelserver_problem", "problems") }
	uid := types.UID("with-problems")
	// A reconcile records what it observes before it writes the status.
	Stalled(uid, status.CauseImagePull)
	if got := series(); len(got) != 0 {
		t.Errorf("series before the name is known: %v", got)
	}
	Observe(Seen{UID: uid, Namespace: "problems", Name: "resnet", Generation: 1, Phase: "Deploying", Reason: "PodsNotReady"})
	RefreshFailed(uid, true)
	SlowFetch(uid, status.SlowFetchOutOfTime)
	SlowFetch(uid, status.SlowFetchNothingReceived)
	want := []string{
		"cause=,name=resnet,namespace=problems,problem=FailedRefresh 1",
		"cause=ImagePull,name=resnet,namespace=problems,problem=StalledRollout 1",
		"cause=NothingReceived,name=resnet,namespace=problems,problem=SlowFetch 1",
	}
	if got := series(); !slices.Equal(got, want) {
		t.Errorf("series:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	Stalled(uid, "")
	RefreshFailed(uid, false)
	AutoscalerAtMaximum(uid, true)
	want = []string{
		"cause=,name=resnet,namespace=problems,problem=AutoscalerAtMaximum 1",
		"cause=NothingReceived,name=resnet,namespace=problems,problem=SlowFetch 1",
	}
	if got := series(); !slices.Equal(got, want) {
		t.Errorf("series once two problems ended and one began:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	Forget(uid)
	if got := series(); len(got) != 0 {
		t.Errorf("series after the ModelServer was deleted: %v", got)
	}
}

// seriesOf are the series of the family name in the namespace ns, as
// "label=value,... value", sorted.
func seriesOf(t *testing.T, name, ns string) []string {
	t.Helper()
	fams, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			if slices.Contains(ls, "namespace="+ns) {
				out = append(out, fmt.Sprintf("%s %v", strings.Join(ls, ","), m.GetGauge().GetValue()))
			}
		}
	}
	slices.Sort(out)
	return out
}

func TestAFetchIsCountedOnceHoweverOftenItsEndIsSeen(t *testing.T) {
	for range 3 {
		FetchEnded("ms", "job-1", "", 2*time.Second, 1000, 1100)
	}
	if got, received := value(t, fetchBytes), value(t, fetchReceived); got != 1000 || received != 1100 {
		t.Errorf("fetch bytes %v, received %v; want 1000 and 1100", got, received)
	}
	// Two models of one ModelServer, their ends observed in turn; the
	// second taken from a copy on the volume, the third from a fetcher
	// that does not say what it received.
	for range 3 {
		FetchEnded("ms", "job-2", "", time.Second, 500, 3)
		FetchEnded("ms", "job-1", "", 2*time.Second, 1000, 1100)
		FetchEnded("ms", "job-4", "", time.Second, 200, -1)
	}
	if got, received := value(t, fetchBytes), value(t, fetchReceived); got != 1700 || received != 1103 {
		t.Errorf("fetch bytes %v, received %v after the other models' Jobs; want 1700 and 1103", got, received)
	}
	// A failure, by its reason.
	for range 3 {
		FetchEnded("ms", "job-3", "OutOfMemory", time.Second, -1, -1)
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
	Observe(Seen{UID: "old", Namespace: "ml", Name: "old", Generation: 1, ChangedAt: time.Now().Add(-48 * time.Hour), Phase: "Ready", Reason: "Ready", Ready: true})
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
