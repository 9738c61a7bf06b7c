package main

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
)

type versions struct {
	Kubernetes          string `json:"kubernetes"`
	Etcd                string `json:"etcd"`
	Kwok                string `json:"kwok"`
	ControllerRuntime   string `json:"controllerRuntime"`
	ClientGo            string `json:"clientGo"`
	Helm                string `json:"helm"`
	HelmOperatorPlugins string `json:"helmOperatorPlugins"`
	Commit              string `json:"commit"`
}

func describeVersions(repo string) versions {
	root := modVersions(filepath.Join(repo, "go.mod"))
	tools := modVersions(filepath.Join(repo, "hack/tools/go.mod"))
	kwok := modVersions(filepath.Join(repo, "hack/tools/kwok/go.mod"))
	peer := modVersions(filepath.Join(repo, "test/bench/peer/go.mod"))
	v := versions{
		Kubernetes:          tools["k8s.io/kubernetes"],
		Etcd:                tools["go.etcd.io/etcd/server/v3"],
		Kwok:                kwok["sigs.k8s.io/kwok"],
		ControllerRuntime:   root["sigs.k8s.io/controller-runtime"],
		ClientGo:            root["k8s.io/client-go"],
		Helm:                root["helm.sh/helm/v3"],
		HelmOperatorPlugins: peer["github.com/operator-framework/helm-operator-plugins"],
	}
	if out, err := exec.Command("git", "-C", repo, "rev-parse", "--short", "HEAD").Output(); err == nil {
		v.Commit = strings.TrimSpace(string(out))
	}
	return v
}

// modVersions reads the required versions of a go.mod.
func modVersions(path string) map[string]string {
	out := map[string]string{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer func() { _ = f.Close() }() // read only
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		if len(fields) >= 2 && strings.HasPrefix(fields[1], "v") {
			out[fields[0]] = fields[1]
		}
	}
	return out
}

var flagDefault = regexp.MustCompile(`(?m)^\s+-([a-z-]+) \S+\n\s+.*\(default ([^)]+)\)`)

// managerDefaults reads the defaults of the operator's flags from its help.
func managerDefaults(manager string) map[string]string {
	out, _ := exec.Command(manager, "manager", "-h").CombinedOutput()
	defaults := map[string]string{}
	for _, m := range flagDefault.FindAllStringSubmatch(string(out), -1) {
		defaults[m[1]] = m[2]
	}
	return defaults
}

func defaultMaxConcurrent(manager string) int {
	n, _ := strconv.Atoi(managerDefaults(manager)["max-concurrent-reconciles"])
	return max(n, 1)
}

func printReport(w *strings.Builder, r *report) {
	fmt.Fprintf(w, "\n=== N = %d  (%s, %d CPUs, load %s) ===\n", r.N, r.Date, r.Machine.CPUs, loads(r))
	if r.Ours != nil || r.Peer != nil || r.Floor != nil {
		printRuns(w, r)
	}
	if r.WriteCosts != nil {
		printWriteCosts(w, r.WriteCosts)
	}
}

func printRuns(w *strings.Builder, r *report) {
	const none = "-"
	row := func(name string, op func(*operatorRun) string, floor func(*floorRun) string) {
		fmt.Fprintf(w, "%-36s", name)
		for _, o := range []*operatorRun{r.Ours, r.Peer} {
			v := none
			if o != nil {
				v = op(o)
			}
			fmt.Fprintf(w, " %26s", v)
		}
		v := none
		if r.Floor != nil && floor != nil {
			v = floor(r.Floor)
		}
		fmt.Fprintf(w, " %26s\n", v)
	}
	floorWorkers := ""
	if r.Floor != nil {
		floorWorkers = fmt.Sprintf(" (%d workers)", r.Floor.Parallelism)
		if r.Floor.OperatorWrites {
			floorWorkers = fmt.Sprintf(" (%d, + writes)", r.Floor.Parallelism)
		}
	}
	fmt.Fprintf(w, "%-36s %26s %26s %26s\n", "", "modelserver-operator", "helm-operator-plugins", "floor"+floorWorkers)
	row("time to Deployed p50/p90/p99/max s", func(o *operatorRun) string { return dist(o.Deployed) }, func(f *floorRun) string { return dist(f.Created) })
	row("time to Ready p50/p90/p99/max s", func(o *operatorRun) string { return dist(o.Ready) }, func(f *floorRun) string { return dist(f.Ready) })
	row("all Deployed s", func(o *operatorRun) string { return fmt.Sprint(o.AllDeployedSeconds) }, func(f *floorRun) string { return fmt.Sprint(f.AllCreatedSeconds) })
	row("all Ready s", func(o *operatorRun) string { return fmt.Sprint(o.AllReadySeconds) }, func(f *floorRun) string { return fmt.Sprint(f.AllReadySeconds) })
	row("all pods ready / and fetched s", (*operatorRun).servedFigures, func(f *floorRun) string { return fmt.Sprint(f.AllReadySeconds) })
	row("API requests total", func(o *operatorRun) string { return fmt.Sprint(o.RequestsTotal) }, func(f *floorRun) string { return fmt.Sprint(f.WritesTotal) })
	row("API requests per CR", func(o *operatorRun) string { return fmt.Sprint(o.RequestsPerCR) }, func(f *floorRun) string { return fmt.Sprint(f.WritesPerCR) })
	row("API writes per CR", func(o *operatorRun) string { return fmt.Sprint(o.WritesPerCR) }, func(f *floorRun) string { return fmt.Sprint(f.WritesPerCR) })
	row("resync: requests / writes", func(o *operatorRun) string { return fmt.Sprintf("%d / %d", o.Resync.Total, o.Resync.Writes) }, nil)
	row("idle: writes", func(o *operatorRun) string { return fmt.Sprint(o.Idle.Writes) }, nil)
	row("idle: requests per minute", func(o *operatorRun) string { return fmt.Sprint(o.Idle.RequestsPerMinute) }, nil)
	row("idle: requests per CR per 10 min", func(o *operatorRun) string { return fmt.Sprint(o.Idle.RequestsPerCRPer10Min) }, nil)
	row("idle: CPU % of a core", func(o *operatorRun) string { return fmt.Sprint(o.Idle.CPUPercentOfCore) }, nil)
	row("CPU limit / throttled periods", func(o *operatorRun) string {
		if o.CPUMax == 0 {
			return "none"
		}
		return fmt.Sprintf("%g / %d of %d", o.CPUMax, o.CPUThrottledPeriods, o.CPUPeriods)
	}, nil)
	row("CPU seconds to all Ready", func(o *operatorRun) string { return fmt.Sprint(o.CPUSeconds) }, nil)
	row("peak RSS MiB", func(o *operatorRun) string { return fmt.Sprint(o.PeakRSSMiB) }, nil)
	row("Ready after serving p50/p90/p99/max s", func(o *operatorRun) string {
		if o.ReadyAfterServing == nil {
			return none
		}
		return dist(*o.ReadyAfterServing)
	}, nil)
	row("Ready after fetch and serving, same", func(o *operatorRun) string {
		if o.ReadyAfterFetchAndServing == nil {
			return none
		}
		return dist(*o.ReadyAfterFetchAndServing)
	}, nil)
	row("fetch ended after serving", func(o *operatorRun) string {
		if o.FetchEndedLast == nil {
			return none
		}
		return fmt.Sprint(*o.FetchEndedLast)
	}, nil)
	for _, name := range cpuColumns() {
		row("CPU s to all Ready, "+name, func(o *operatorRun) string { return fmt.Sprint(o.ControlPlaneCPUSeconds[name]) },
			func(f *floorRun) string { return fmt.Sprint(f.ControlPlaneCPUSeconds[name]) })
	}
	row("release Secret bytes per CR", func(o *operatorRun) string { return fmt.Sprint(o.ReleaseBytesPerCR) }, nil)
	for _, name := range localcluster.Binaries {
		row("peak RSS MiB, "+name, func(o *operatorRun) string { return fmt.Sprint(o.ControlPlanePeakRSSMiB[name]) },
			func(f *floorRun) string { return fmt.Sprint(f.ControlPlanePeakRSSMiB[name]) })
	}
	row("etcd: keys / bytes per CR, live", func(o *operatorRun) string { return o.Etcd.live() }, func(f *floorRun) string { return f.Etcd.live() })
	row("etcd: bytes per CR with history", func(o *operatorRun) string { return o.Etcd.withHistory() }, func(f *floorRun) string { return f.Etcd.withHistory() })
	row("etcd: file growth per CR (what the quota counts)", func(o *operatorRun) string { return o.Etcd.file() }, func(f *floorRun) string { return f.Etcd.file() })
	for _, res := range storedResources(r) {
		row("etcd: keys / bytes per CR, "+res, func(o *operatorRun) string { return o.Etcd.resource(res) }, func(f *floorRun) string { return f.Etcd.resource(res) })
	}
	printWindows(r, row, none)
	keys := make([]string, 0, len(r.Ratios))
	for k := range r.Ratios {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "ratio %-36s %g\n", k, r.Ratios[k])
	}
	printWrites(w, "ours", r.Ours)
	printWrites(w, "peer", r.Peer)
}

// printWrites prints what an operator's requests and status writes were
// made of.
func printWrites(w *strings.Builder, name string, o *operatorRun) {
	if o == nil {
		return
	}
	fmt.Fprintf(w, "%s by verb and resource: %s\n", name, topCounts(o.Requests))
	if len(o.StatusSteps) > 0 {
		fmt.Fprintf(w, "%s status writes by step: %s\n", name, topCounts(o.StatusSteps))
	}
	for _, step := range slices.Sorted(maps.Keys(o.StatusStepExamples)) {
		fmt.Fprintf(w, "  %s, e.g.: %s\n", step, strings.Join(o.StatusStepExamples[step], "; "))
	}
}

// printWindows prints the rows of the upgrade, update and delete windows,
// for a report whose runs had them.
func printWindows(r *report, row func(string, func(*operatorRun) string, func(*floorRun) string), none string) {
	if (r.Ours != nil && r.Ours.Upgrade != nil) || (r.Peer != nil && r.Peer.Upgrade != nil) {
		printUpgrades(row, none)
	}
	if (r.Ours != nil && r.Ours.Update != nil) || (r.Peer != nil && r.Peer.Update != nil) || (r.Floor != nil && r.Floor.Update != nil) {
		printUpdates(row, none)
	}
	if (r.Ours != nil && r.Ours.Delete != nil) || (r.Peer != nil && r.Peer.Delete != nil) || (r.Floor != nil && r.Floor.Delete != nil) {
		printDeletes(row, none)
	}
}

func printUpgrades(row func(string, func(*operatorRun) string, func(*floorRun) string), none string) {
	up := func(f func(u *upgradeWindow) string) func(*operatorRun) string {
		return func(o *operatorRun) string {
			if o.Upgrade == nil {
				return none
			}
			return f(o.Upgrade)
		}
	}
	row("upgrade: chart version", up(func(u *upgradeWindow) string { return u.ChartVersion }), nil)
	row("upgrade: releases upgraded", up(func(u *upgradeWindow) string { return fmt.Sprint(u.Upgraded) }), nil)
	row("upgrade: time p50/p90/p99/max s", up(func(u *upgradeWindow) string { return dist(u.TimeToUpgraded) }), nil)
	row("upgrade: quiet after s", up(func(u *upgradeWindow) string { return fmt.Sprint(u.Seconds) }), nil)
	row("upgrade: requests / writes per CR", up(func(u *upgradeWindow) string {
		return fmt.Sprintf("%g / %g", u.RequestsPerCR, u.WritesPerCR)
	}), nil)
	row("upgrade: CPU s / peak RSS MiB", up(func(u *upgradeWindow) string { return fmt.Sprintf("%g / %g", u.CPUSeconds, u.PeakRSSMiB) }), nil)
	row("upgrade: control plane CPU s", up(func(u *upgradeWindow) string {
		return fmt.Sprintf("%g (apiserver %g)", u.ControlPlaneCPUSeconds["total"], u.ControlPlaneCPUSeconds["kube-apiserver"])
	}), nil)
	row("upgrade: Deployments rolled", up(func(u *upgradeWindow) string { return fmt.Sprint(u.DeploymentsRolled) }), nil)
	row("upgrade: left Ready", up(func(u *upgradeWindow) string { return fmt.Sprint(u.LeftReady) }), nil)
}

// windowRows gives the row printers of a window that each run may have
// (W, as op and floor find it, nil for none): all prints a figure of the
// operators and the floor, ops one of the operators alone.
func windowRows[W any](row func(string, func(*operatorRun) string, func(*floorRun) string), none string,
	op func(*operatorRun) *W, floor func(*floorRun) *W) (all, ops func(string, func(*W) string)) {
	show := func(w *W, f func(*W) string) string {
		if w == nil {
			return none
		}
		return f(w)
	}
	all = func(name string, f func(*W) string) {
		row(name, func(o *operatorRun) string { return show(op(o), f) }, func(fl *floorRun) string { return show(floor(fl), f) })
	}
	ops = func(name string, f func(*W) string) {
		row(name, func(o *operatorRun) string { return show(op(o), f) }, nil)
	}
	return all, ops
}

func printUpdates(row func(string, func(*operatorRun) string, func(*floorRun) string), none string) {
	all, ops := windowRows(row, none, func(o *operatorRun) *updateWindow { return o.Update }, func(f *floorRun) *updateWindow { return f.Update })
	all("update: time to rolled p50/p90/p99/max s", func(u *updateWindow) string { return dist(u.TimeToRolled) })
	all("update: all rolled s", func(u *updateWindow) string {
		if u.NotRolled > 0 {
			return fmt.Sprintf("%g (%d not rolled)", u.AllRolledSeconds, u.NotRolled)
		}
		return fmt.Sprint(u.AllRolledSeconds)
	})
	ops("update: time to Ready again p50/p90/p99/max s", func(u *updateWindow) string {
		if u.TimeToReady == nil {
			return none
		}
		return dist(*u.TimeToReady)
	})
	ops("update: all Ready again s", func(u *updateWindow) string {
		if u.TimeToReady == nil {
			return none
		}
		return fmt.Sprint(u.AllReadySeconds)
	})
	all("update: requests / writes per CR", func(u *updateWindow) string { return u.perCR() })
	ops("update: CPU s, quiet after s", func(u *updateWindow) string { return u.cpuAndQuiet() })
	all("update: control plane CPU s", func(u *updateWindow) string { return controlPlaneCPU(u.ControlPlaneCPUSeconds) })
}

func printDeletes(row func(string, func(*operatorRun) string, func(*floorRun) string), none string) {
	all, ops := windowRows(row, none, func(o *operatorRun) *deleteWindow { return o.Delete }, func(f *floorRun) *deleteWindow { return f.Delete })
	all("delete: time to gone p50/p90/p99/max s", func(d *deleteWindow) string { return dist(d.TimeToGone) })
	all("delete: all gone / all clean s", func(d *deleteWindow) string {
		return fmt.Sprintf("%g / %g", d.AllGoneSeconds, d.AllCleanSeconds)
	})
	for _, k := range remainKinds(true) {
		all("delete: last "+k.name+" gone s", func(d *deleteWindow) string {
			if at, ok := d.LastDeletedSeconds[k.name]; ok {
				return fmt.Sprint(at)
			}
			return none
		})
	}
	all("delete: left when the wait ended", func(d *deleteWindow) string {
		if d.Complete {
			return "nothing"
		}
		return fmt.Sprint(d.Left)
	})
	ops("delete: requests / writes per CR", func(d *deleteWindow) string { return d.perCR() })
	ops("delete: CPU s, quiet after s", func(d *deleteWindow) string { return d.cpuAndQuiet() })
	all("delete: control plane CPU s", func(d *deleteWindow) string { return controlPlaneCPU(d.ControlPlaneCPUSeconds) })
}

func (l operatorLoad) perCR() string { return fmt.Sprintf("%g / %g", l.RequestsPerCR, l.WritesPerCR) }

func (l operatorLoad) cpuAndQuiet() string {
	return fmt.Sprintf("%g, %g", l.CPUSeconds, l.QuietAfterSeconds)
}

func controlPlaneCPU(m map[string]float64) string {
	return fmt.Sprintf("%g (apiserver %g)", m["total"], m["kube-apiserver"])
}

func printWriteCosts(w *strings.Builder, costs []writeCost) {
	columns := cpuColumns()
	fmt.Fprintf(w, "\nCPU ms per write %-40s", "")
	for _, c := range columns {
		fmt.Fprintf(w, " %12s", c)
	}
	fmt.Fprintf(w, " %9s\n", "seconds")
	for _, wc := range costs {
		fmt.Fprintf(w, "%-57s", wc.Write)
		for _, c := range columns {
			fmt.Fprintf(w, " %12g", wc.CPUMillis[c])
		}
		fmt.Fprintf(w, " %9g\n", wc.Seconds)
	}
}

func dist(d distribution) string { return fmt.Sprintf("%g/%g/%g/%g", d.P50, d.P90, d.P99, d.Max) }

func loads(r *report) string {
	var parts []string
	for _, o := range []*operatorRun{r.Ours, r.Peer} {
		if o != nil {
			parts = append(parts, fmt.Sprintf("%g→%g", o.LoadAverage[0], o.LoadAverage[1]))
		}
	}
	if r.Floor != nil {
		parts = append(parts, fmt.Sprintf("%g→%g", r.Floor.LoadAverage[0], r.Floor.LoadAverage[1]))
	}
	if r.WriteCosts != nil {
		parts = append(parts, fmt.Sprintf("%g", r.WriteCostsLoad))
	}
	return strings.Join(parts, ", ")
}

func topCounts(c counts) string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sortByCount(keys, c)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, c[k]))
	}
	return strings.Join(parts, ", ")
}

// servedFigures is when the cluster had done its part for every
// ModelServer: all pods ready, and that and every fetch ended.
func (o *operatorRun) servedFigures() string {
	if o.AllServedSeconds == 0 {
		return "-"
	}
	return fmt.Sprintf("%g / %g", o.AllServedSeconds, o.AllServedAndFetchedSeconds)
}
