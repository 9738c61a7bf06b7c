package alerts

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/metrics"
	"github.com/modelserver-dev/modelserver-operator/internal/status"
)

// dashboard is what these tests read of config/grafana/dashboard.json, as
// Grafana reads it.
type dashboard struct {
	UID           string `json:"uid"`
	Title         string `json:"title"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Datasource *datasource     `json:"datasource"`
			AllValue   string          `json:"allValue"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID          int         `json:"id"`
	Type        string      `json:"type"`
	Title       string      `json:"title"`
	Description string      `json:"description"`
	Datasource  *datasource `json:"datasource"`
	GridPos     struct {
		X int `json:"x"`
		Y int `json:"y"`
		W int `json:"w"`
		H int `json:"h"`
	} `json:"gridPos"`
	Targets []struct {
		RefID        string      `json:"refId"`
		Expr         string      `json:"expr"`
		LegendFormat string      `json:"legendFormat"`
		Format       string      `json:"format"`
		Datasource   *datasource `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

// theDatasource is what every panel and query reads from: the
// dashboard's variable, so that it works with whatever Prometheus data
// source a Grafana has.
var theDatasource = datasource{Type: "prometheus", UID: "${datasource}"}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile("../../config/grafana/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	return d
}

// graphs are the dashboard's panels that are not rows, rows' own panels
// (a collapsed row holds them) included.
func (d dashboard) graphs() []panel {
	var out []panel
	for _, p := range d.Panels {
		if p.Type == "row" {
			out = append(out, p.Panels...)
			continue
		}
		out = append(out, p)
	}
	return out
}

// expand puts in place of the variables in a query the values Grafana
// would: the namespace and ModelServer chosen (the test's), and
// the intervals Grafana works out for a 30 s scrape interval and a
// 1-hour range.
func expand(expr, namespace, modelServer string) string {
	return strings.NewReplacer(
		"$__rate_interval", "2m",
		"$__range", "1h",
		"$namespace", namespace,
		"$modelserver", modelServer,
	).Replace(expr)
}

// chosen stands for a variable's value in the checks of what queries
// select.
const chosen = "chosen-by-the-user"

// The dashboard loads in Grafana as it is meant to: one uid, a data
// source chosen by the user, panels that do not overlap on the 24-column
// grid, each with a title, a description and queries Prometheus parses.
func TestTheDashboardIsWhatGrafanaLoads(t *testing.T) {
	d := readDashboard(t)
	if d.UID == "" || d.Title == "" || d.SchemaVersion < 36 {
		t.Errorf("uid %q, title %q, schemaVersion %d: want a uid, a title and a schema of Grafana 9 or later", d.UID, d.Title, d.SchemaVersion)
	}
	var names []string
	for _, v := range d.Templating.List {
		names = append(names, v.Name)
		if v.Type == "query" && (v.Datasource == nil || *v.Datasource != theDatasource) {
			t.Errorf("variable %s reads from %v, want %v", v.Name, v.Datasource, theDatasource)
		}
	}
	if !slices.Equal(names, []string{"datasource", "namespace", "modelserver"}) {
		t.Errorf("variables %v, want datasource, namespace, modelserver", names)
	}
	checkGrid(t, d)
	for _, p := range d.graphs() {
		if p.Title == "" || p.Description == "" {
			t.Errorf("panel %d: title %q, description %q: want both", p.ID, p.Title, p.Description)
		}
		if p.Datasource == nil || *p.Datasource != theDatasource {
			t.Errorf("panel %q reads from %v, want %v", p.Title, p.Datasource, theDatasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		checkQueries(t, p)
	}
}

// checkGrid checks that every panel has an id of its own and a place on
// the 24-column grid that no other panel takes.
func checkGrid(t *testing.T, d dashboard) {
	t.Helper()
	var placed []panel
	for _, p := range d.Panels {
		placed = append(placed, p)
		if p.Type == "row" {
			if p.GridPos.W != 24 || p.GridPos.H != 1 || p.GridPos.X != 0 {
				t.Errorf("row %q at %+v, want the whole width, 1 high", p.Title, p.GridPos)
			}
			placed = append(placed, p.Panels...)
		}
	}
	ids := map[int]string{}
	for i, p := range placed {
		if other, dup := ids[p.ID]; dup || p.ID == 0 {
			t.Errorf("panel %q has id %d, which %q has too (or none)", p.Title, p.ID, other)
		}
		ids[p.ID] = p.Title
		g := p.GridPos
		if g.X < 0 || g.W <= 0 || g.H <= 0 || g.X+g.W > 24 {
			t.Errorf("panel %q at %+v, off the 24-column grid", p.Title, g)
		}
		for _, q := range placed[:i] {
			if h := q.GridPos; g.X < h.X+h.W && h.X < g.X+g.W && g.Y < h.Y+h.H && h.Y < g.Y+g.H {
				t.Errorf("panels %q (%+v) and %q (%+v) overlap", p.Title, g, q.Title, h)
			}
		}
	}
}

// checkQueries checks that a panel's queries have refIds of their own,
// read from the dashboard's data source and parse.
func checkQueries(t *testing.T, p panel) {
	t.Helper()
	var refs []string
	for _, q := range p.Targets {
		if q.RefID == "" || slices.Contains(refs, q.RefID) {
			t.Errorf("panel %q: query refId %q empty or used twice", p.Title, q.RefID)
		}
		refs = append(refs, q.RefID)
		if q.Datasource == nil || *q.Datasource != theDatasource {
			t.Errorf("panel %q query %s reads from %v, want %v", p.Title, q.RefID, q.Datasource, theDatasource)
		}
		if _, err := promParser.ParseExpr(expand(q.Expr, chosen, chosen)); err != nil {
			t.Errorf("panel %q query %s: %v", p.Title, q.RefID, err)
		}
	}
}

// perModelServer are the metrics with a series per ModelServer: a query of
// them shows the namespaces and ModelServers the user chose, by the label
// that names the ModelServer.
var perModelServer = map[string]string{
	"modelserver_status_phase":                      "name",
	"modelserver_problem":                           "name",
	"modelserver_latency_objective_seconds":         "name",
	"modelserver_availability_objective_ratio":      "name",
	"modelserver_paused_since_seconds":              "name",
	":tensorflow:serving:request_count":             "service",
	":tensorflow:serving:request_latency_bucket":    "service",
	":tensorflow:cc:saved_model:load_attempt_count": "service",
}

// Every series the dashboard's queries and variables select is one the
// operator (or TF Serving) writes, with the labels they select, group and
// name legends by; a query of a ModelServer's series keeps to the
// namespaces and ModelServers chosen.
func TestTheDashboardReadsSeriesTheOperatorWrites(t *testing.T) {
	d := readDashboard(t)
	c := queryChecker{t: t, labelsOf: servedLabels(t), values: map[string][]string{
		"namespace":  {chosen},
		"name":       {chosen, "modelserver"},
		"service":    {chosen},
		"phase":      metrics.Phases,
		"status":     grpcCodes,
		"API":        {""},
		"controller": {"modelserver"},
		"job":        {"modelserver-controller-manager-metrics-service"},
	}}
	for _, p := range d.graphs() {
		for _, q := range p.Targets {
			c.check(fmt.Sprintf("panel %q query %s", p.Title, q.RefID), q.Expr, true)
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((.+), *(\w+)\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatal(err)
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			t.Errorf("variable %s: %q, want label_values(series, label)", v.Name, q.Query)
			continue
		}
		c.check("variable "+v.Name, m[1], false)
		vs := selectors(t, expand(m[1], chosen, chosen))
		if have, _ := seriesLabels(c.labelsOf, vs[0].Name); !slices.Contains(have, m[2]) {
			t.Errorf("variable %s lists values of %s, a label %s does not have (%v)", v.Name, m[2], vs[0].Name, have)
		}
		if v.AllValue != ".*" {
			t.Errorf("variable %s: All is %q, want .* (any value, as =~ reads it)", v.Name, v.AllValue)
		}
	}
}

// queryChecker checks what queries select and group by against the
// labels of the series the operator serves (labelsOf) and the values it
// gives them (values).
type queryChecker struct {
	t        *testing.T
	labelsOf map[string][]string
	values   map[string][]string
}

// check checks a query; scoped: one of what the user chose (a panel's),
// which keeps to the chosen ModelServers, not a variable's.
func (c queryChecker) check(where, expr string, scoped bool) {
	c.t.Helper()
	e, err := promParser.ParseExpr(expand(expr, chosen, chosen))
	if err != nil {
		c.t.Errorf("%s: %v", where, err)
		return
	}
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			c.selector(where, n, scoped)
		case *parser.AggregateExpr:
			have := innerLabels(n.Expr, c.labelsOf)
			for _, l := range n.Grouping {
				if !slices.Contains(have, l) {
					c.t.Errorf("%s groups by %s, which %s does not have (%v)", where, l, n.Expr, have)
				}
			}
		}
		return nil
	})
}

func (c queryChecker) selector(where string, vs *parser.VectorSelector, scoped bool) {
	c.t.Helper()
	have, known := seriesLabels(c.labelsOf, vs.Name)
	if !known {
		c.t.Errorf("%s selects %s, which the operator does not serve", where, vs.Name)
		return
	}
	for _, problem := range matcherProblems(vs, have, c.values) {
		c.t.Errorf("%s %s", where, problem)
	}
	if by, ok := perModelServer[vs.Name]; ok && scoped && (!selectsBy(vs, "namespace") || !selectsBy(vs, by)) {
		c.t.Errorf("%s: %s, not kept to the chosen namespace and ModelServer (namespace=~\"$namespace\", %s=~\"$modelserver\")", where, vs, by)
	}
}

// seriesLabels are the labels of a series name the operator serves: a
// histogram's buckets, sum and count are served under the family's name.
func seriesLabels(labelsOf map[string][]string, name string) ([]string, bool) {
	if have, ok := labelsOf[name]; ok {
		return have, true
	}
	if base, ok := strings.CutSuffix(name, "_bucket"); ok {
		have, ok := labelsOf[base]
		return append(slices.Clip(have), "le"), ok
	}
	for _, suffix := range []string{"_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			have, ok := labelsOf[base]
			return have, ok
		}
	}
	return nil, false
}

func selectsBy(vs *parser.VectorSelector, label string) bool {
	return slices.ContainsFunc(vs.LabelMatchers, func(m *labels.Matcher) bool {
		return m.Name == label && m.Type == labels.MatchRegexp && m.Value == chosen
	})
}

// innerLabels are the labels an expression's series can have: those of
// the series it selects, less what an aggregation inside it drops.
func innerLabels(e parser.Node, labelsOf map[string][]string) []string {
	switch n := e.(type) {
	case *parser.AggregateExpr:
		if !n.Without {
			return n.Grouping
		}
		return slices.DeleteFunc(innerLabels(n.Expr, labelsOf), func(l string) bool { return slices.Contains(n.Grouping, l) })
	case *parser.VectorSelector:
		have, _ := seriesLabels(labelsOf, n.Name)
		return have
	}
	var out []string
	for _, c := range parser.Children(e) {
		out = append(out, innerLabels(c, labelsOf)...)
	}
	return out
}

// Every panel shows something once the operator has something to show:
// on a cluster with ModelServers in several phases, a stalled rollout,
// fetches, reconciles, Helm operations and TF Serving's requests and
// loads, each query returns series (no NaN), with the labels its legend
// names. With one ModelServer chosen, queries of a ModelServer's series
// show that one.
func TestEveryPanelShowsWhatThereIsToShow(t *testing.T) {
	d := readDashboard(t)
	p := somethingToShow(t)
	for _, sel := range []struct{ namespace, modelServer string }{{".*", ".*"}, {ml, "bert"}} {
		for _, pn := range d.graphs() {
			for _, q := range pn.Targets {
				where := fmt.Sprintf("%v: panel %q query %s", sel, pn.Title, q.RefID)
				expr := expand(q.Expr, sel.namespace, sel.modelServer)
				series := p.instant(expr)
				if len(series) == 0 {
					t.Errorf("%s shows nothing: %s", where, expr)
				}
				by := perModelServer[selectors(t, expr)[0].Name]
				for _, s := range series {
					checkShown(t, where, s, q.LegendFormat, by, sel.modelServer)
				}
			}
		}
	}
}

// checkShown checks a series a panel shows: a number, with the labels its
// legend names, and the ModelServer chosen (labelled by) when one is.
func checkShown(t *testing.T, where string, s promql.Sample, legend, by, modelServer string) {
	t.Helper()
	if math.IsNaN(s.F) {
		t.Errorf("%s shows NaN for %s", where, s.Metric)
	}
	for _, l := range legendLabels.FindAllStringSubmatch(legend, -1) {
		if !s.Metric.Has(l[1]) {
			t.Errorf("%s: the legend names %s, which %s lacks", where, l[1], s.Metric)
		}
	}
	if by != "" && s.Metric.Has(by) && modelServer != ".*" && s.Metric.Get(by) != modelServer {
		t.Errorf("%s shows %s, not the chosen %s", where, s.Metric, modelServer)
	}
}

// legendLabels are the labels a legend format names.
var legendLabels = regexp.MustCompile(`\{\{ *(\w+) *\}\}`)

// somethingToShow is a Prometheus that has scraped an operator with two
// ModelServers for 12 minutes: both created and fetched, resnet Ready and
// its spec changed, fetched and Ready again; bert's new model refused by
// the store, its pods unable to pull their image, and bert paused an
// hour ago. Its controller
// reconciles and both serve requests all the while.
func somethingToShow(t *testing.T) *prometheus {
	t.Helper()
	enqueue := startController(t, "modelserver", func(reconcile.Request) error { return nil })
	p := newPrometheus(t)
	resnet, bert := newModelServer(t, "resnet"), newModelServer(t, "bert")
	pods := map[string]string{"resnet": servingPod("resnet", "resnet-7d9f8-x2x8z"), "bert": servingPod("bert", "bert-5c6d7-q9w4k")}
	fetched := func(ms *modelServer, failure string) {
		metrics.FetchEnded(ms.UID, types.UID(fmt.Sprint("job-", uidSeq.Add(1))), failure, 90*time.Second, 512<<20, 512<<20)
	}
	serve := func(d time.Duration) {
		for end := p.now.Add(d); p.now.Before(end); {
			enqueue(fmt.Sprint("r", p.now.Unix()))
			for model, pod := range pods {
				p.outcomes(pod, model, 909, 0.01)
				p.requests(pod, model, "predict", 909, 0.01)
			}
			p.step()
		}
	}
	for _, ms := range []*modelServer{resnet, bert} {
		ms.ChangedAt = time.Now().Add(-2 * time.Minute)
		ms.is(servingv1alpha1.PhaseDeploying, servingv1alpha1.ReasonPodsNotReady)
		metrics.HelmOperation("install", metrics.ResultSuccess, time.Second)
		fetched(ms, "")
		p.more[fmt.Sprintf(`:tensorflow:cc:saved_model:load_attempt_count{%s,model_path="/models/%s/1",status="success"}`, pods[ms.Name], ms.Name)] = 1
	}
	resnet.P99Latency, bert.P99Latency = 250*time.Millisecond, 100*time.Millisecond
	resnet.Availability, bert.Availability = 0.999, 0.99
	resnet.is(servingv1alpha1.PhaseReady, servingv1alpha1.ReasonReady)
	serve(10 * time.Minute)
	bert.Generation, bert.ChangedAt = 2, time.Now().Add(-time.Minute)
	bert.PausedSince = p.now.Add(-time.Hour)
	bert.is(servingv1alpha1.PhaseDegraded, servingv1alpha1.ReasonPodsNotReady)
	metrics.Stalled(bert.UID, status.CauseImagePull)
	metrics.HelmOperation("upgrade", metrics.ResultSuccess, time.Second)
	fetched(bert, servingv1alpha1.ReasonAccessDenied)
	fetched(resnet, "")
	resnet.Generation, resnet.ChangedAt = 2, time.Now().Add(-3*time.Minute)
	resnet.is(servingv1alpha1.PhaseReady, servingv1alpha1.ReasonReady)
	serve(2 * time.Minute)
	return p
}

// instant evaluates a query now, as Grafana's last point of a panel.
func (p *prometheus) instant(expr string) promql.Vector {
	p.t.Helper()
	q, err := p.engine.NewInstantQuery(context.Background(), p.db, nil, expr, p.now)
	if err != nil {
		p.t.Fatalf("%s: %v", expr, err)
	}
	defer q.Close()
	res := q.Exec(context.Background())
	if res.Err != nil {
		p.t.Fatalf("%s: %v", expr, res.Err)
	}
	v, err := res.Vector()
	if err != nil {
		p.t.Fatalf("%s: %v", expr, err)
	}
	return v
}
