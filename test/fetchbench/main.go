// Command fetchbench times the model fetcher (`fetcher fetch`, as the
// model-fetch Job runs it) against s5cmd and rclone, two S3 clients users
// tune for speed, on the same models from the same S3 server (versitygw on
// loopback) into the same file system:
//
//   - 64 files of 4 MiB (a sharded checkpoint),
//   - one file of 1 GiB (what ranged parallel GETs are for),
//   - 2,000 files of 4 KiB (where each request's fixed cost counts),
//
// each a valid SavedModel layout filled with incompressible bytes. Every
// run copies into a fresh empty directory, is checked byte for byte against
// what was uploaded, and is timed with the CPU time and peak resident set
// the kernel reports for the tool's process. Runs of the tools alternate,
// in an order shuffled each round, to spread over all of them the
// machine's noise and what one tool's run leaves the machine for the next.
//
//	make bench-fetch
//
// writes test/bench/results/<date>-fetch.json and -fetch.png, and prints a
// table.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/modelserver-dev/modelserver-operator/test/machine"
)

type config struct {
	repo     string
	bin      string
	fetcher  string
	spawn    string
	out      string
	workdir  string
	label    string
	runs     int
	shapes   []string
	tools    []string
	keep     bool
	settings toolSettings
	// orderSeed seeds the order the tools run in each round.
	orderSeed uint64
	// memoryMax, when not 0, is the memory limit of a cgroup each tool
	// runs in, as the fetch Job's container would limit it.
	memoryMax int64
}

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cfg, err := parseFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("benchmark failed", "err", err)
		stop()
		os.Exit(1)
	}
}

func parseFlags() (config, error) {
	cfg := config{settings: defaultToolSettings()}
	var shapeNames, toolList, memoryMax string
	flag.StringVar(&cfg.repo, "repo", ".", "The repository's root, whose hack/tools pin the tools' versions.")
	flag.StringVar(&cfg.bin, "bin", "bin", "The directory holding versitygw, s5cmd and rclone (`make bench-fetch-tools`).")
	flag.StringVar(&cfg.fetcher, "fetcher", "bin/fetcher", "The fetcher binary (cmd/fetcher), whose `fetch` is ours; the ours-* variants are the binaries beside it named with their suffix (fetcher-nohash, fetcher-noflush, fetcher-bare).")
	flag.StringVar(&cfg.spawn, "spawn", "", "The spawn program (./spawn), which starts each tool and reports its usage. (default: spawn beside this program)")
	flag.StringVar(&cfg.out, "out", "test/bench/results", "Where the results go.")
	flag.StringVar(&cfg.workdir, "workdir", os.TempDir(), "Where the server's data and the copies go: all on one file system.")
	flag.StringVar(&cfg.label, "label", "", "Added to the results' file names: <date>-fetch-<label>.json.")
	flag.IntVar(&cfg.runs, "runs", 5, "Runs of each tool on each shape.")
	flag.StringVar(&shapeNames, "shapes", "", "Comma-separated shapes to run (default: all).")
	flag.StringVar(&toolList, "tools", "ours,s5cmd,rclone", "Comma-separated tools to run: ours, s5cmd, rclone, and ours without its hash or its flush or both (ours-nohash, ours-noflush, ours-bare), or hashing with XXH3 in place of BLAKE3 (ours-xxh3).")
	flag.Uint64Var(&cfg.orderSeed, "order-seed", 0, "Seeds the shuffle of the tools' order in each round, to repeat a set's order (0: a new seed, written in the results).")
	flag.BoolVar(&cfg.keep, "keep", false, "Keep the work directory (the server's data and the logs).")
	flag.StringVar(&memoryMax, "memory-max", "", "Run each tool in a cgroup with this memory limit (a quantity: 512Mi, the fetch Job's default), as the Job's container runs; its writes in the page cache count against it. Needs root.")
	flag.IntVar(&cfg.settings.OursConcurrency, "ours-concurrency", cfg.settings.OursConcurrency, "fetcher fetch --concurrency.")
	flag.IntVar(&cfg.settings.S5cmdWorkers, "s5cmd-numworkers", cfg.settings.S5cmdWorkers, "s5cmd --numworkers.")
	flag.IntVar(&cfg.settings.S5cmdConcurrency, "s5cmd-concurrency", cfg.settings.S5cmdConcurrency, "s5cmd cp --concurrency (parts of one file at once).")
	flag.IntVar(&cfg.settings.S5cmdPartSizeMiB, "s5cmd-part-size", cfg.settings.S5cmdPartSizeMiB, "s5cmd cp --part-size, in MiB.")
	flag.IntVar(&cfg.settings.RcloneTransfers, "rclone-transfers", cfg.settings.RcloneTransfers, "rclone --transfers.")
	flag.IntVar(&cfg.settings.RcloneCheckers, "rclone-checkers", cfg.settings.RcloneCheckers, "rclone --checkers.")
	flag.IntVar(&cfg.settings.RcloneStreams, "rclone-streams", cfg.settings.RcloneStreams, "rclone --multi-thread-streams.")
	flag.StringVar(&cfg.settings.RcloneStreamCutoff, "rclone-cutoff", cfg.settings.RcloneStreamCutoff, "rclone --multi-thread-cutoff.")
	flag.Parse()
	if cfg.orderSeed == 0 {
		// Odd, so never 0: the seed written in the results repeats the order.
		cfg.orderSeed = rand.Uint64() | 1
	}
	if flag.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	if cfg.runs < 1 {
		return cfg, errors.New("-runs must be at least 1")
	}
	if memoryMax != "" {
		q, err := resource.ParseQuantity(memoryMax)
		if err != nil || q.Value() <= 0 {
			return cfg, fmt.Errorf("-memory-max: %q is not a positive quantity of bytes", memoryMax)
		}
		cfg.memoryMax = q.Value()
	}
	known := func(kind string, names []string, valid []string) error {
		for _, n := range names {
			if !slices.Contains(valid, n) {
				return fmt.Errorf("unknown %s %q (known: %s)", kind, n, strings.Join(valid, ", "))
			}
		}
		return nil
	}
	var all []string
	for _, s := range shapes() {
		all = append(all, s.Name)
	}
	cfg.shapes = all
	if shapeNames != "" {
		cfg.shapes = strings.Split(shapeNames, ",")
	}
	cfg.tools = strings.Split(toolList, ",")
	if err := known("shape", cfg.shapes, all); err != nil {
		return cfg, err
	}
	return cfg, known("tool", cfg.tools, toolNames())
}

func run(ctx context.Context, cfg config, log *slog.Logger) error {
	if cfg.spawn == "" {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		cfg.spawn = filepath.Join(filepath.Dir(self), "spawn")
	}
	for _, p := range []*string{&cfg.repo, &cfg.bin, &cfg.fetcher, &cfg.spawn, &cfg.out} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	work, err := os.MkdirTemp(cfg.workdir, "fetchbench-")
	if err != nil {
		return err
	}
	if cfg.keep {
		log.Info("keeping the work directory", "path", work)
	} else {
		defer func() { _ = os.RemoveAll(work) }()
	}
	for _, d := range []string{"logs", "home", "scratch", "runs"} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o755); err != nil {
			return err
		}
	}

	versitygw := filepath.Join(cfg.bin, "versitygw")
	srv, err := startServer(ctx, versitygw, filepath.Join(work, "s3"), filepath.Join(work, "logs", "versitygw.log"))
	if err != nil {
		return err
	}
	defer srv.stop()
	log.Info("versitygw serving", "endpoint", srv.Endpoint)
	credsDir := filepath.Join(work, "credentials")
	if err := writeCredentials(credsDir, srv); err != nil {
		return err
	}

	pins := filepath.Join(cfg.repo, "hack", "tools")
	tools, err := selectTools(newTools(srv, cfg.fetcher, cfg.bin, credsDir, cfg.settings), cfg.tools, pins)
	if err != nil {
		return err
	}

	r := &report{
		Date:      time.Now().UTC().Format("2006-01-02"),
		Label:     cfg.label,
		Machine:   describeHost(cfg.workdir),
		Server:    "versitygw " + moduleVersion(filepath.Join(pins, "versitygw", "go.mod"), "github.com/versity/versitygw") + " --keep-alive",
		Runs:      cfg.runs,
		MemoryMax: cfg.memoryMax,
		Tools:     tools,
		Settings:  cfg.settings,
		OrderSeed: cfg.orderSeed,
	}
	for _, sh := range shapes() {
		if !slices.Contains(cfg.shapes, sh.Name) {
			continue
		}
		log.Info("uploading", "shape", sh.Name, "files", len(sh.Files), "bytes", sh.Bytes())
		want, err := srv.upload(ctx, sh, filepath.Join(work, "scratch"))
		if err != nil {
			return fmt.Errorf("upload %s: %w", sh.Name, err)
		}
		res, err := runShape(ctx, cfg, log, work, srv, sh, want, tools)
		if err != nil {
			return err
		}
		r.Shapes = append(r.Shapes, res)
	}

	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	base := filepath.Join(cfg.out, r.Date+"-fetch")
	if cfg.label != "" {
		base += "-" + cfg.label
	}
	if err := writeJSON(r, base+".json"); err != nil {
		return err
	}
	if err := writePlot(r, base+".png"); err != nil {
		return err
	}
	printTable(os.Stdout, r)
	log.Info("results written", "json", base+".json", "plot", base+".png")
	return nil
}

// limited is a command line, in a memory cgroup of its own when it has a
// limit.
type limited struct {
	args []string
	cg   *machine.Cgroup // nil: no limit
}

// limitMemory puts args in a new cgroup with memoryMax bytes of memory;
// with 0, it leaves them as they are.
func limitMemory(memoryMax int64, args []string) (limited, error) {
	if memoryMax <= 0 {
		return limited{args: args}, nil
	}
	cg, err := machine.NewCgroup(machine.Limits{MemoryBytes: memoryMax})
	if err != nil {
		return limited{}, fmt.Errorf("-memory-max: %w", err)
	}
	bin, rest := cg.Wrap(args[0], args[1:])
	return limited{args: append([]string{bin}, rest...), cg: cg}, nil
}

func (l limited) remove() {
	if l.cg != nil {
		_ = l.cg.Remove()
	}
}

// peakMiB is the most memory the cgroup was charged, page cache included;
// 0 without a limit.
func (l limited) peakMiB() (float64, error) {
	if l.cg == nil {
		return 0, nil
	}
	b, err := l.cg.PeakBytes()
	return round(float64(b) / mib), err
}

// oomKilled says, after a failed run, whether the kernel killed the tool
// for its memory limit.
func (l limited) oomKilled() string {
	if l.cg == nil {
		return ""
	}
	if n, err := l.cg.OOMKills(); err == nil && n > 0 {
		return " (killed for passing its memory limit)"
	}
	return ""
}

// selectTools keeps the tools of all that names lists, each with its
// version, failing for one whose binary is missing.
func selectTools(all []*tool, names []string, pins string) ([]*tool, error) {
	versions := map[string]string{
		"s5cmd":  moduleVersion(filepath.Join(pins, "s3tools", "go.mod"), "github.com/peak/s5cmd/v2"),
		"rclone": moduleVersion(filepath.Join(pins, "s3tools", "go.mod"), "github.com/rclone/rclone"),
	}
	var tools []*tool
	for _, t := range all {
		if !slices.Contains(names, t.Name) {
			continue
		}
		if _, err := os.Stat(t.Binary); err != nil {
			return nil, fmt.Errorf("%s: %w (make bench-fetch builds it)", t.Name, err)
		}
		t.Version = versions[t.Name]
		if strings.HasPrefix(t.Name, "ours") {
			t.Version = "the working tree"
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// runShape runs every tool cfg.runs times on sh, in an order shuffled
// each round (roundOrders).
func runShape(ctx context.Context, cfg config, log *slog.Logger, work string, srv *server, sh shape, want map[string]fileSum, tools []*tool) (shapeResult, error) {
	res := shapeResult{Name: sh.Name, About: sh.About, Files: len(sh.Files), Bytes: sh.Bytes()}
	samples := make([][]sample, len(tools))
	for round, order := range roundOrders(len(tools), cfg.runs, cfg.orderSeed) {
		for _, i := range order {
			t := tools[i]
			s, err := runOnce(ctx, cfg.spawn, cfg.memoryMax, work, srv, t, sh, want, round+1)
			if err != nil {
				return res, err
			}
			log.Info("run", "shape", sh.Name, "tool", t.Name, "run", round+1, "seconds", s.Seconds, "durableSeconds", s.DurableSeconds, "mibPerSecond", s.MiBps, "cpuSeconds", s.CPUSeconds, "serverCpuSeconds", s.ServerCPU, "peakRssMiB", s.PeakRSSMiB, "cgroupPeakMiB", s.CgroupPeakMiB)
			samples[i] = append(samples[i], s)
		}
	}
	for i, t := range tools {
		res.Results = append(res.Results, resultOf(t.Name, samples[i]))
	}
	return res, nil
}

// runOnce copies sh with t into a fresh directory, times the sync that
// puts the copy on disk, checks the copy and removes it. Dirty pages of
// earlier runs are written out first, so that no run pays for another's.
// With memoryMax, the tool runs in a cgroup of its own with that limit.
func runOnce(ctx context.Context, spawn string, memoryMax int64, work string, srv *server, t *tool, sh shape, want map[string]fileSum, n int) (sample, error) {
	name := fmt.Sprintf("%s-%s-%d", t.Name, sh.Name, n)
	dest := filepath.Join(work, "runs", name)
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return sample{}, err
	}
	defer func() { _ = os.RemoveAll(dest) }()
	syscall.Sync()
	args, env := t.command(sh.Name, dest)
	cg, err := limitMemory(memoryMax, args)
	if err != nil {
		return sample{}, err
	}
	defer cg.remove()
	serverBefore, err := srv.cpuSeconds()
	if err != nil {
		return sample{}, err
	}
	s, err := measure(ctx, spawn, cg.args, env, filepath.Join(work, "home"), filepath.Join(work, "logs", name+".log"))
	if err != nil {
		return s, fmt.Errorf("%s on %s: %w%s", t.Name, sh.Name, err, cg.oomKilled())
	}
	if s.CgroupPeakMiB, err = cg.peakMiB(); err != nil {
		return s, err
	}
	serverAfter, err := srv.cpuSeconds()
	if err != nil {
		return s, err
	}
	s.ServerCPU = round(serverAfter - serverBefore)
	// Ours flushes the model before it exits; the others leave their
	// writes in the page cache. The time of a sync after each tells what
	// a durable copy costs them.
	start := time.Now()
	syscall.Sync()
	s.SyncSeconds = round(time.Since(start).Seconds())
	s.DurableSeconds = round(s.Seconds + s.SyncSeconds)
	if err := verifyTree(t.modelDir(dest), want, t.ignore...); err != nil {
		return s, fmt.Errorf("%s on %s, run %d: the copy is not the model: %w", t.Name, sh.Name, n, err)
	}
	s.Run = n
	s.MiBps = mibPerSecond(sh.Bytes(), s.Seconds)
	return s, nil
}
