package alerts

import (
	"context"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/util/teststorage"
	"sigs.k8s.io/yaml"

	// The controllers' metrics (reconciles, errors), registered with the
	// operator's own as the manager serves them.
	_ "sigs.k8s.io/controller-runtime/pkg/controller"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	// The operator's metrics, registered as the manager registers them.
	_ "github.com/modelserver-dev/modelserver-operator/internal/metrics"
)

// interval is both the scrape interval and the rules' evaluation
// interval, as kube-prometheus-stack's defaults have them.
const interval = 30 * time.Second

// promParser parses PromQL as Prometheus does by default.
var promParser = parser.NewParser(parser.Options{})

// prometheusRule is what the Prometheus Operator reads of a
// PrometheusRule: its spec's groups are the rule file it hands to
// Prometheus. Decoded strictly, a field it does not have is an error; the
// real-node suite has the apiserver check the whole object against the
// CRD's schema.
type prometheusRule struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				For         string            `json:"for"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

// ruleFile is config/prometheus/alerts.yaml: the PrometheusRule, and its
// groups as the Prometheus Operator writes them into Prometheus's rule
// file (the spec's groups, marshalled), parsed and checked by Prometheus.
func ruleFile(t *testing.T) *rulefmt.RuleGroups {
	t.Helper()
	raw, err := os.ReadFile("../../config/prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var pr prometheusRule
	if err := yaml.UnmarshalStrict(raw, &pr); err != nil || pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Fatalf("alerts.yaml is not a PrometheusRule (%s %s): %v", pr.APIVersion, pr.Kind, err)
	}
	file, err := yaml.Marshal(pr.Spec)
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.Parse(file, false, model.UTF8Validation, promParser, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("Prometheus refuses the rules: %v", errs)
	}
	return groups
}

// prometheus scrapes the operator's metrics registry into a TSDB every
// interval on a simulated clock, as Prometheus scrapes the operator
// through dist/monitoring.yaml's ServiceMonitor, and evaluates the rules
// after each scrape.
type prometheus struct {
	t      *testing.T
	db     *teststorage.TestStorage
	engine *promql.Engine
	rules  []*rules.AlertingRule
	now    time.Time

	// target are the labels Prometheus gives the operator pod's target;
	// the scraped series' own labels win over them (honorLabels).
	target labels.Labels
	// down: the target answers no scrape (up is 0); gone: there is no
	// target at all (no up either).
	down, gone bool
	// more are series written beside the registry's (name and labels,
	// value), standing for what the test cannot make the operator write.
	more map[string]float64

	// last are the series of the scrape before, by name and labels, for
	// the stale markers of those the next one lacks.
	last map[string]labels.Labels
}

// fired counts every alert that fires in any test of the package, for the
// test that each one can.
var fired = map[string]int{}

func newPrometheus(t *testing.T) *prometheus {
	t.Helper()
	groups := ruleFile(t)
	p := &prometheus{
		t:      t,
		db:     teststorage.New(t),
		engine: promqltest.NewTestEngine(t, false, 0, 1_000_000),
		now:    time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC),
		target: operatorPod("modelserver-controller-manager-6d4f9-abcde"),
		more:   map[string]float64{},
		last:   map[string]labels.Labels{},
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			expr, err := promParser.ParseExpr(r.Expr)
			if err != nil {
				t.Fatal(err)
			}
			p.rules = append(p.rules, rules.NewAlertingRule(r.Alert, expr, time.Duration(r.For), time.Duration(r.KeepFiringFor),
				labels.FromMap(r.Labels), labels.FromMap(r.Annotations), labels.EmptyLabels(), "", true, slog.New(slog.DiscardHandler)))
		}
	}
	return p
}

// operatorPod are the target labels of an operator pod scraped through the
// metrics Service.
func operatorPod(pod string) labels.Labels {
	return labels.FromStrings(
		"job", "modelserver-controller-manager-metrics-service",
		"namespace", "modelserver-system",
		"service", "modelserver-controller-manager-metrics-service",
		"endpoint", "https",
		"pod", pod,
		"instance", "198.18.0.7:8443",
	)
}

// run moves the clock on by d, scraping and evaluating at every interval
// on the way: what changed at the start is first scraped one interval
// later, so an alert whose rule waits 5 minutes fires 5½ minutes after
// what it is about began.
func (p *prometheus) run(d time.Duration) {
	p.t.Helper()
	for end := p.now.Add(d); p.now.Before(end); {
		p.step()
	}
}

// step moves the clock on by one interval, then scrapes and evaluates.
func (p *prometheus) step() {
	p.t.Helper()
	p.now = p.now.Add(interval)
	p.scrape()
	p.evaluate()
}

func (p *prometheus) scrape() {
	p.t.Helper()
	app := p.db.Appender(context.Background())
	ts := p.now.UnixMilli()
	seen := map[string]labels.Labels{}
	add := func(l labels.Labels, v float64) {
		if _, err := app.Append(0, l, ts, v); err != nil {
			p.t.Fatalf("append %s: %v", l, err)
		}
		seen[l.String()] = l
	}
	if !p.gone {
		up := 1.0
		if p.down {
			up = 0
		}
		add(labels.NewBuilder(p.target).Set(model.MetricNameLabel, "up").Labels(), up)
	}
	if !p.gone && !p.down {
		for _, smpl := range p.registrySamples() {
			add(smpl.l, smpl.v)
		}
		for series, v := range p.more {
			l, err := promParser.ParseMetric(series)
			if err != nil {
				p.t.Fatal(err)
			}
			b := labels.NewBuilder(p.target)
			l.Range(func(l labels.Label) { b.Set(l.Name, l.Value) })
			add(b.Labels(), v)
		}
	}
	// A series a scrape no longer has, or of a scrape that failed, is
	// marked stale, as Prometheus marks it.
	for k, l := range p.last {
		if _, ok := seen[k]; !ok {
			if _, err := app.Append(0, l, ts, math.Float64frombits(value.StaleNaN)); err != nil {
				p.t.Fatal(err)
			}
		}
	}
	p.last = seen
	if err := app.Commit(); err != nil {
		p.t.Fatal(err)
	}
}

type sample struct {
	l labels.Labels
	v float64
}

// registrySamples are the operator's registry's samples, with the
// target's labels under their own: a histogram's as the text format gives
// them, a series for each bucket (le), its sum and its count.
func (p *prometheus) registrySamples() []sample {
	p.t.Helper()
	fams, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		p.t.Fatal(err)
	}
	var out []sample
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			add := func(name string, v float64, more ...string) {
				b := labels.NewBuilder(p.target)
				for _, l := range m.GetLabel() {
					b.Set(l.GetName(), l.GetValue())
				}
				for i := 0; i+1 < len(more); i += 2 {
					b.Set(more[i], more[i+1])
				}
				out = append(out, sample{b.Set(model.MetricNameLabel, name).Labels(), v})
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				add(f.GetName(), m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				add(f.GetName(), m.GetGauge().GetValue())
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					add(f.GetName()+"_bucket", float64(b.GetCumulativeCount()), model.BucketLabel, strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64))
				}
				add(f.GetName()+"_bucket", float64(h.GetSampleCount()), model.BucketLabel, "+Inf")
				add(f.GetName()+"_sum", h.GetSampleSum())
				add(f.GetName()+"_count", float64(h.GetSampleCount()))
			}
		}
	}
	return out
}

func (p *prometheus) evaluate() {
	p.t.Helper()
	for _, r := range p.rules {
		if _, err := r.Eval(context.Background(), 0, p.now, rules.EngineQueryFunc(p.engine, p.db), nil, 0); err != nil {
			p.t.Fatalf("%s: %v", r.Name(), err)
		}
		for _, a := range r.ActiveAlerts() {
			if a.State == rules.StateFiring && a.FiredAt.Equal(p.now) {
				fired[r.Name()]++
			}
		}
	}
}

// alert is a firing alert, as Alertmanager would receive it.
type alert struct {
	labels, annotations map[string]string
}

// firing are the alerts firing now, named name, whose labels include
// with.
func (p *prometheus) firing(name string, with map[string]string) []alert {
	var out []alert
	for _, r := range p.rules {
		if r.Name() != name {
			continue
		}
	next:
		for _, a := range r.ActiveAlerts() {
			if a.State != rules.StateFiring {
				continue
			}
			ls := a.Labels.Map()
			for k, v := range with {
				if ls[k] != v {
					continue next
				}
			}
			out = append(out, alert{ls, a.Annotations.Map()})
		}
	}
	return out
}

// firingNames are the names of all alerts firing now, sorted, once each.
func (p *prometheus) firingNames() []string {
	var out []string
	for _, r := range p.rules {
		for _, a := range r.ActiveAlerts() {
			if a.State == rules.StateFiring && !slices.Contains(out, r.Name()) {
				out = append(out, r.Name())
			}
		}
	}
	slices.Sort(out)
	return out
}

// expectFiring fails unless exactly one alert name fires for the labels
// with, and returns it.
func (p *prometheus) expectFiring(name string, with map[string]string) alert {
	p.t.Helper()
	got := p.firing(name, with)
	if len(got) != 1 {
		p.t.Fatalf("%s: %d alerts %v firing for %v, want 1 (firing: %s)", p.now.Format(time.TimeOnly), len(got), got, with, strings.Join(p.firingNames(), ", "))
	}
	for k, v := range got[0].annotations {
		if strings.Contains(v, "<error expanding template") {
			p.t.Errorf("%s's %s: %s", name, k, v)
		}
	}
	return got[0]
}

// firesAfter runs for d, at the end of which name must not fire yet for
// the labels with, then one interval more, when it must; it returns the
// alert.
func (p *prometheus) firesAfter(d time.Duration, name string, with map[string]string) alert {
	p.t.Helper()
	p.run(d)
	p.expectNotFiring(name, with)
	p.step()
	return p.expectFiring(name, with)
}

// expectNotFiring fails if name fires for the labels with.
func (p *prometheus) expectNotFiring(name string, with map[string]string) {
	p.t.Helper()
	if got := p.firing(name, with); len(got) != 0 {
		p.t.Fatalf("%s: %s firing for %v: %v", p.now.Format(time.TimeOnly), name, with, got)
	}
}
