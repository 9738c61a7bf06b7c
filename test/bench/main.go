// Command bench measures the ModelServer operator: how fast N ModelServers
// become Deployed and Ready, what that costs the apiserver in requests,
// what an idle operator still asks of it, its CPU and memory, and the same
// for an Operator SDK-style Helm operator (helm-operator-plugins, in
// ./peer) running the same chart with the same values, each on a fresh
// local control plane, beside the floor: the same objects created by a
// plain client with no operator at all.
//
//	go run . -n 1,100,1000
//
// writes results/<date>-<n>.json and PNG plots beside it, and prints the
// figures. `make bench` runs it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/modelserver-dev/modelserver-operator/test/machine"
)

type config struct {
	repo              string
	ns                []int
	systems           map[string]bool
	idle              time.Duration
	createParallelism int
	maxConcurrent     int
	qps               float64
	burst             int
	oursArgs          []string
	oursLimits        machine.Limits
	peerLimits        machine.Limits
	out               string
	label             string
	readyTimeout      time.Duration
	floorWrites       bool
	upgrade           bool
	delete            bool
	update            bool
	componentQPS      int
}

// report is one results/<date>-<n>.json.
type report struct {
	Date     string          `json:"date"`
	N        int             `json:"n"`
	Label    string          `json:"label,omitempty"`
	Machine  machine.Machine `json:"machine"`
	Versions versions        `json:"versions"`
	// ComponentQPS is -component-qps: 0, the components' defaults.
	ComponentQPS int          `json:"componentQPS"`
	Ours         *operatorRun `json:"ours,omitempty"`
	Peer         *operatorRun `json:"peer,omitempty"`
	Floor        *floorRun    `json:"floor,omitempty"`
	// WriteCosts: what each of the operator's writes beyond the release's
	// objects costs the control plane (-systems writes).
	WriteCosts []writeCost `json:"writeCosts,omitempty"`
	// WriteCostsLoad is the 1-minute load average as the write costs'
	// cluster started.
	WriteCostsLoad float64 `json:"writeCostsLoad,omitempty"`
	// Ratios: ours/floor time to all Deployed; peer/ours requests and time
	// to all Ready (higher is better for ours).
	Ratios map[string]float64 `json:"ratios"`
}

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg, err := parseFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("benchmark failed", "err", err)
		os.Exit(1)
	}
}

func parseFlags() (config, error) {
	var cfg config
	var ns, systems, oursArgs, oursMemoryMax, oursCPUs, operatorCPUs string
	flag.StringVar(&cfg.repo, "repo", "../..", "The repository's root.")
	flag.StringVar(&ns, "n", envOr("BENCH_N", "1,100,1000"), "Comma-separated numbers of ModelServers (default $BENCH_N, else 1,100,1000).")
	flag.StringVar(&systems, "systems", "ours,peer,floor", "What to run: ours, peer, floor; writes (what each of the operator's writes costs the control plane).")
	flag.DurationVar(&cfg.idle, "idle", 2*time.Minute, "Idle window after all are Ready and resynced.")
	flag.IntVar(&cfg.createParallelism, "create-parallelism", 16, "Workers creating the ModelServers.")
	flag.IntVar(&cfg.maxConcurrent, "max-concurrent-reconciles", 0, "Passed to both operators, and the floor's parallelism (0: the operator's default).")
	flag.Float64Var(&cfg.qps, "kube-api-qps", 0, "Passed to both operators (0: the operator's default).")
	flag.IntVar(&cfg.burst, "kube-api-burst", 0, "Passed to both operators (0: the operator's default).")
	flag.StringVar(&oursArgs, "ours-args", "", "More flags for the ModelServer operator, space-separated.")
	flag.StringVar(&oursMemoryMax, "ours-memory-max", "", "Run the ModelServer operator in a cgroup with this memory limit (a quantity: 256Mi), as a container limited to it; needs root.")
	flag.StringVar(&operatorCPUs, "operator-cpus", "1", "Run each operator, ours and the peer, in a cgroup of its own with this CPU limit (a quantity: 500m, 1), as the kubelet runs an operator's container limited to it; 1 is the example Deployment's limit. Needs root; 0 runs them as bare processes.")
	flag.StringVar(&oursCPUs, "ours-cpus", "", "The ModelServer operator's CPU limit, in place of -operator-cpus's.")
	flag.StringVar(&cfg.out, "out", "results", "Directory for the JSON and PNG results.")
	flag.StringVar(&cfg.label, "label", "", "Suffix of the result files' names, e.g. before.")
	flag.DurationVar(&cfg.readyTimeout, "ready-timeout", 20*time.Minute, "How long to wait for all to be Ready.")
	flag.BoolVar(&cfg.floorWrites, "floor-operator-writes", false, "The floor also makes the operator's other writes (a release record, two status writes, the Ready Event), and its Ready is the ModelServer's Ready condition.")
	flag.BoolVar(&cfg.upgrade, "upgrade", false, "After the idle window, replace each operator with a build of the next release, whose chart has the next version and a new Service annotation, and measure the upgrade of every release.")
	flag.BoolVar(&cfg.update, "update", false, "After the idle window (and the upgrade), change every ModelServer's model URI from the create workers, and measure until each has fetched it and rolled its pods onto it (for the floor, the objects the chart renders for the new model written directly).")
	flag.BoolVar(&cfg.delete, "delete", false, "Last, delete every ModelServer from the create workers, and measure until each is gone and nothing of its release is left (for the floor, the garbage collector's cascade).")
	flag.IntVar(&cfg.componentQPS, "component-qps", 400, "The client QPS of kube-controller-manager and kube-scheduler (burst twice as many), raised so that they do not set the pace; 0 leaves each its default (20 and 50).")
	flag.Parse()
	for s := range strings.SplitSeq(ns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return cfg, fmt.Errorf("-n: %q is not a positive number", s)
		}
		cfg.ns = append(cfg.ns, n)
	}
	cfg.systems = map[string]bool{}
	for s := range strings.SplitSeq(systems, ",") {
		switch s = strings.TrimSpace(s); s {
		case "ours", "peer", "floor", "writes":
			cfg.systems[s] = true
		default:
			return cfg, fmt.Errorf("-systems: unknown %q", s)
		}
	}
	if cfg.componentQPS < 0 {
		return cfg, fmt.Errorf("-component-qps: %d is below 0", cfg.componentQPS)
	}
	cfg.oursArgs = strings.Fields(oursArgs)
	if oursMemoryMax != "" {
		q, err := resource.ParseQuantity(oursMemoryMax)
		if err != nil || q.Value() <= 0 {
			return cfg, fmt.Errorf("-ours-memory-max: %q is not a positive quantity of bytes", oursMemoryMax)
		}
		cfg.oursLimits.MemoryBytes = q.Value()
	}
	cpus, err := parseCPUs("-operator-cpus", operatorCPUs)
	if err != nil {
		return cfg, err
	}
	cfg.peerLimits.CPUs, cfg.oursLimits.CPUs = cpus, cpus
	if oursCPUs != "" {
		if cfg.oursLimits.CPUs, err = parseCPUs("-ours-cpus", oursCPUs); err != nil {
			return cfg, err
		}
	}
	repo, err := filepath.Abs(cfg.repo)
	cfg.repo = repo
	return cfg, err
}

// parseCPUs reads a CPU limit; 0 is none.
func parseCPUs(flagName, v string) (float64, error) {
	q, err := resource.ParseQuantity(v)
	if err != nil || q.Sign() < 0 {
		return 0, fmt.Errorf("%s: %q is not a quantity of CPUs", flagName, v)
	}
	return q.AsApproximateFloat64(), nil
}

func run(ctx context.Context, cfg config, log *slog.Logger) error {
	tmp, err := os.MkdirTemp("", "modelserver-bench-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	log.Info("building the operator and the peer")
	manager, peer, err := buildBinaries(cfg.repo, tmp)
	if err != nil {
		return err
	}
	common := []string{"--metrics-bind-address=0", "--health-probe-bind-address=0"}
	var tuning []string
	if cfg.maxConcurrent > 0 {
		tuning = append(tuning, fmt.Sprintf("--max-concurrent-reconciles=%d", cfg.maxConcurrent))
	} else {
		cfg.maxConcurrent = defaultMaxConcurrent(manager)
	}
	if cfg.qps > 0 {
		tuning = append(tuning, fmt.Sprintf("--kube-api-qps=%g", cfg.qps))
	}
	if cfg.burst > 0 {
		tuning = append(tuning, fmt.Sprintf("--kube-api-burst=%d", cfg.burst))
	}
	ours := operatorSpec{
		name:   "modelserver-operator",
		binary: manager,
		args:   append(append(append([]string{"manager", "--fetch-image=example.com/modelserver-operator:bench"}, common...), tuning...), cfg.oursArgs...),
		limits: cfg.oursLimits,
	}
	peerSpec := operatorSpec{
		name:                "helm-operator-plugins",
		binary:              peer,
		args:                append([]string{"--fetch-image=example.com/modelserver-operator:bench"}, peerTuning(manager, tuning)...),
		limits:              cfg.peerLimits,
		readyFromDeployment: true,
		openStatus:          true,
	}
	if cfg.upgrade {
		log.Info("building the next release of the operator and the peer")
		nextManager, nextPeer, version, err := buildNext(cfg.repo, tmp)
		if err != nil {
			return fmt.Errorf("the next release: %w", err)
		}
		ours.next = &nextBuild{binary: nextManager, version: version}
		peerSpec.next = &nextBuild{binary: nextPeer, version: version}
	}
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	for _, n := range cfg.ns {
		r, err := runSystems(ctx, cfg, n, ours, peerSpec, log)
		if err != nil {
			return err
		}
		if err := writeReport(r, cfg.out, log); err != nil {
			return err
		}
	}
	return nil
}

// runSystems runs each system -systems names for n ModelServers, one
// after another.
func runSystems(ctx context.Context, cfg config, n int, ours, peer operatorSpec, log *slog.Logger) (*report, error) {
	var err error
	r := &report{Date: time.Now().UTC().Format("2006-01-02"), N: n, Label: cfg.label, Machine: machine.Describe(), Ratios: map[string]float64{}}
	r.Versions = describeVersions(cfg.repo)
	r.ComponentQPS = cfg.componentQPS
	if cfg.systems["ours"] {
		if r.Ours, err = runOperator(ctx, cfg, ours, n, log); err != nil {
			return nil, fmt.Errorf("ours at N=%d: %w", n, err)
		}
	}
	if cfg.systems["peer"] {
		if r.Peer, err = runOperator(ctx, cfg, peer, n, log); err != nil {
			return nil, fmt.Errorf("peer at N=%d: %w", n, err)
		}
	}
	if cfg.systems["floor"] {
		if r.Floor, err = runFloor(ctx, cfg, n, log); err != nil {
			return nil, fmt.Errorf("floor at N=%d: %w", n, err)
		}
	}
	if cfg.systems["writes"] {
		r.WriteCostsLoad = loadAverage()
		if r.WriteCosts, err = runWriteCosts(ctx, cfg, n, log); err != nil {
			return nil, fmt.Errorf("write costs at N=%d: %w", n, err)
		}
	}
	r.computeRatios()
	return r, nil
}

// writeReport writes a run's JSON and plots under dir, and prints its
// table.
func writeReport(r *report, dir string, log *slog.Logger) error {
	base := filepath.Join(dir, r.Date+"-"+strconv.Itoa(r.N))
	if r.Label != "" {
		base += "-" + r.Label
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(base+".json", append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := writePlots(r, base); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	var table strings.Builder
	printReport(&table, r)
	if _, err := os.Stdout.WriteString(table.String()); err != nil {
		return err
	}
	log.Info("wrote results", "json", base+".json")
	return nil
}

// machineCPU is the CPU seconds the control plane and the harness spent
// until all were Ready, from the meter's readings.
func machineCPU(used map[string]float64) float64 {
	return used["total"] + used["harness"]
}

// sameWorkCPU is what kube-controller-manager, the scheduler and kwok
// spent until all were Ready. They roll out the same Deployments, Jobs and
// pods for ours as for the floor, so ours' figure over the floor's is how
// much more CPU the same work cost in ours' run: on a shared machine it
// moves by more than 15 % from run to run, and the time ratios with it.
func sameWorkCPU(used map[string]float64) float64 {
	return used["kube-controller-manager"] + used["kube-scheduler"] + used["kwok"]
}

// computeRatios sets the ratios the targets are stated in (for ours over
// the floor and over the peer, lower is better; for the peer over ours,
// higher is better for ours).
func (r *report) computeRatios() {
	if r.Ours != nil && r.Floor != nil {
		r.Ratios["oursAllDeployedOverFloor"] = ratio(r.Ours.AllDeployedSeconds, r.Floor.AllCreatedSeconds)
		r.Ratios["oursAllReadyOverFloorReady"] = ratio(r.Ours.AllReadySeconds, r.Floor.AllReadySeconds)
		r.Ratios["oursAllServedOverFloorReady"] = ratio(r.Ours.AllServedSeconds, r.Floor.AllReadySeconds)
		r.Ratios["oursReadyP50OverFloorP50"] = ratio(r.Ours.Ready.P50, r.Floor.Ready.P50)
		r.Ratios["oursReadyP90OverFloorP90"] = ratio(r.Ours.Ready.P90, r.Floor.Ready.P90)
		r.Ratios["oursMachineCPUOverFloor"] = ratio(machineCPU(r.Ours.ControlPlaneCPUSeconds)+r.Ours.CPUSeconds,
			machineCPU(r.Floor.ControlPlaneCPUSeconds))
		oursSame, floorSame := sameWorkCPU(r.Ours.ControlPlaneCPUSeconds), sameWorkCPU(r.Floor.ControlPlaneCPUSeconds)
		r.Ratios["oursSameWorkCPUOverFloor"] = ratio(oursSame, floorSame)
		// The all Ready ratio as it would be had the same work cost ours'
		// run what it cost the floor's: over many runs the time ratio
		// follows the same work's CPU ratio, so one run's figure read at
		// equal cost is the operator's, not the machine's.
		r.Ratios["oursAllReadyOverFloorReadyAtEqualCost"] = ratio(r.Ours.AllReadySeconds*floorSame, r.Floor.AllReadySeconds*oursSame)
		if r.Ours.Update != nil && r.Floor.Update != nil {
			r.Ratios["oursUpdateAllReadyOverFloorRolled"] = ratio(r.Ours.Update.AllReadySeconds, r.Floor.Update.AllRolledSeconds)
			r.Ratios["oursUpdateAllRolledOverFloor"] = ratio(r.Ours.Update.AllRolledSeconds, r.Floor.Update.AllRolledSeconds)
		}
		if r.Ours.Delete != nil && r.Floor.Delete != nil {
			r.Ratios["oursDeleteAllCleanOverFloor"] = ratio(r.Ours.Delete.AllCleanSeconds, r.Floor.Delete.AllCleanSeconds)
		}
	}
	if r.Peer != nil && r.Floor != nil {
		r.Ratios["peerAllDeployedOverFloor"] = ratio(r.Peer.AllDeployedSeconds, r.Floor.AllCreatedSeconds)
		r.Ratios["peerAllReadyOverFloorReady"] = ratio(r.Peer.AllReadySeconds, r.Floor.AllReadySeconds)
		r.Ratios["peerReadyP50OverFloorP50"] = ratio(r.Peer.Ready.P50, r.Floor.Ready.P50)
	}
	if r.Ours != nil && r.Peer != nil {
		r.Ratios["peerOverOursRequests"] = ratio(float64(r.Peer.RequestsTotal), float64(r.Ours.RequestsTotal))
		r.Ratios["oursOverPeerWrites"] = ratio(float64(r.Ours.WritesTotal), float64(r.Peer.WritesTotal))
		r.Ratios["peerOverOursAllReady"] = ratio(r.Peer.AllReadySeconds, r.Ours.AllReadySeconds)
		r.Ratios["peerOverOursReadyP50"] = ratio(r.Peer.Ready.P50, r.Ours.Ready.P50)
		r.Ratios["peerOverOursAllDeployed"] = ratio(r.Peer.AllDeployedSeconds, r.Ours.AllDeployedSeconds)
		r.Ratios["peerOverOursIdleRequests"] = ratio(float64(r.Peer.Idle.Total), float64(r.Ours.Idle.Total))
		r.Ratios["peerOverOursCPUSeconds"] = ratio(r.Peer.CPUSeconds, r.Ours.CPUSeconds)
		if r.Ours.Update != nil && r.Peer.Update != nil {
			r.Ratios["peerRolledOverOursReadyUpdate"] = ratio(r.Peer.Update.AllRolledSeconds, r.Ours.Update.AllReadySeconds)
			r.Ratios["peerOverOursUpdateRequests"] = ratio(float64(r.Peer.Update.Total), float64(r.Ours.Update.Total))
			r.Ratios["peerOverOursUpdateWrites"] = ratio(float64(r.Peer.Update.Writes), float64(r.Ours.Update.Writes))
		}
		if r.Ours.Delete != nil && r.Peer.Delete != nil {
			r.Ratios["peerOverOursDeleteAllClean"] = ratio(r.Peer.Delete.AllCleanSeconds, r.Ours.Delete.AllCleanSeconds)
			r.Ratios["peerOverOursDeleteRequests"] = ratio(float64(r.Peer.Delete.Total), float64(r.Ours.Delete.Total))
		}
	}
}

// peerTuning gives the peer the same concurrency and client limits as the
// operator, so that the comparison is of designs, not of settings.
func peerTuning(manager string, tuning []string) []string {
	has := func(prefix string) bool {
		for _, t := range tuning {
			if strings.HasPrefix(t, prefix) {
				return true
			}
		}
		return false
	}
	out := append([]string(nil), tuning...)
	defaults := managerDefaults(manager)
	for _, f := range []string{"max-concurrent-reconciles", "kube-api-qps", "kube-api-burst"} {
		if !has("--"+f+"=") && defaults[f] != "" {
			out = append(out, "--"+f+"="+defaults[f])
		}
	}
	return out
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
