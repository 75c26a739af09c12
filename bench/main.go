// Command bench measures flyte-manager through its public API: it starts
// the manager (built with -tags bench) on a fresh SQLite database and on a
// fresh PostgreSQL database, submits runs whose root fans out to children
// with RunService.CreateRun (task spec and inputs inline), follows each with
// WatchActionDetails, and prints actions per second and the submit →
// terminal latency of runs (p50, p99), for three runners:
//
//   - noop: the bench build's no-op runner (FLYTE_MANAGER_BENCH_RUNNER=noop,
//     see executor/local/noop_bench.go). No process starts; the parent
//     enqueues its children and waits for them over ActionsService exactly
//     like the SDK's controller. This measures the control plane.
//   - a0: real task processes, the flyte SDK's runtime from the project's
//     virtualenv, with a fan-out parent built by bench/realtasks.py.
//   - kube: the kubernetes executor (executor.type kubernetes) on the test
//     cluster (package executor/testcluster, started in-process with the
//     node agent's noop runner: Pods go Running, then Succeeded with exit
//     code 0, no process starts). Each run is one action, a raw container
//     that declares no outputs. Besides actions/s and latency it prints, per
//     action over the measured runs: the executor's API-server writes (the
//     manager's flyte_manager_kube_api_writes_total, by verb and kind), every
//     write the API server served (its apiserver_request_total, by verb and
//     resource: the executor's plus the node agent's bindings, Pod status
//     updates and Pod deletions, and the cluster's garbage collector), the
//     manager database's transactions (PostgreSQL's pg_stat_database
//     xact_commit + xact_rollback; not counted on SQLite), and the ratio to
//     the reference manager's 11 API-server writes and 42 PostgreSQL
//     transactions per single-action run. It needs the cluster's binaries
//     (make envtest-assets).
//
// The console runner draws a run's action tree of 1,000 and 10,000 actions
// in the web console, in headless Chromium, folded and open (console.go).
//
// It prints figures; it asserts nothing about time.
//
// Besides that throughput table it measures, on the noop runner: one run
// with N children (-scale), actions/s against fan-out width (-curve-fanout)
// and against runs in flight (-curve-inflight); and, on the a0 runner and
// SQLite, one run whose parent fans out to -big-fanout real children. Every
// scenario also prints the manager's peak RSS and the SQL statements per
// action (its flyte_manager_db_statements_total; on PostgreSQL also
// pg_stat_statements). -warm on|off|both sets executor.local.warmStart for
// the a0 scenarios. Every figure is printed beside its target and its
// ratio to the figures issue 10 measured before its work.
//
//	go run ./bench [-runs 100 -fanout 20] [-real-runs 4 -real-fanout 8] [-kube-runs 200 -kube-inflight 20]
//	    [-backends sqlite,postgres] [-runners noop,a0,kube,replicas,console] [-scale 100,1000,10000]
//	    [-curve-fanout 10,100,1000] [-curve-inflight 1,10,100] [-big-fanout 300] [-warm off|on|both]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"fmgr.dev/internal/pgtest"
)

// Default sizes, also the warm-up runs' biggest.
const (
	defaultFanout     = 20
	defaultRealFanout = 8
)

type options struct {
	runs, fanout         int
	realRuns, realFanout int
	bigFanout            int
	kubeRuns             int
	kubeInflight         int
	warmup               int
	inflight             int
	parallelism          int
	scale                []int
	curveFanout          []int
	curveInflight        []int
	curveActions         int
	curveRuns            int
	warm                 string
	backends, runners    []string
	managerBin           string
	beforeBin            string
	venv                 string
	pprofDir             string
	keep                 bool
	timeout              time.Duration
	listRuns             int
	pgTop                int
}

// runnerNames are the -runners values.
var runnerNames = []string{"noop", "a0", "kube", "replicas", "console"}

func main() {
	var o options
	var backends, runners, scale, curveFanout, curveInflight string
	flag.IntVar(&o.runs, "runs", 100, "runs per noop throughput scenario")
	flag.IntVar(&o.fanout, "fanout", defaultFanout, "children per run in noop throughput and in-flight curve scenarios")
	flag.IntVar(&o.realRuns, "real-runs", 4, "runs per a0 throughput scenario (each action is a Python process; 0: skip it, e.g. to run only the real fan-out)")
	flag.IntVar(&o.realFanout, "real-fanout", defaultRealFanout, "children per run in a0 scenarios")
	flag.IntVar(&o.bigFanout, "big-fanout", 300, "children of the one run of the real fan-out scenario (a0, SQLite; 0: skip it)")
	flag.IntVar(&o.kubeRuns, "kube-runs", 200, "runs per kube scenario (each a single action, one Pod)")
	flag.IntVar(&o.kubeInflight, "kube-inflight", 20, "runs in flight at once in kube scenarios (0: submit all at once)")
	flag.IntVar(&o.warmup, "warmup", 2, "runs submitted (and not measured) before each scenario's measured runs, of at most the default fan-out")
	flag.IntVar(&o.inflight, "inflight", 0, "runs in flight at once in noop and a0 throughput scenarios (0: submit all at once)")
	flag.IntVar(&o.parallelism, "parallelism", 0, "executor.local.maxParallelism of the manager (0: 256 for noop, the manager's default 2 × CPUs for a0)")
	flag.StringVar(&scale, "scale", "100,1000,10000", "noop scale series: one run with each number of children (\"\": skip)")
	flag.StringVar(&curveFanout, "curve-fanout", "10,100,1000", "noop curve: fan-out widths, each with about -curve-actions actions in all (\"\": skip)")
	flag.IntVar(&o.curveActions, "curve-actions", 2000, "actions per point of the fan-out curve (runs = this / (1 + width))")
	flag.StringVar(&curveInflight, "curve-inflight", "1,10,100", "noop curve: runs in flight, each point max(-curve-runs, in flight) runs of -fanout children (\"\": skip)")
	flag.IntVar(&o.curveRuns, "curve-runs", 20, "fewest runs per point of the in-flight curve")
	flag.StringVar(&o.warm, "warm", "off", "executor.local.warmStart for the a0 scenarios: on, off (writes no key: the manager's default), both (each a0 scenario twice)")
	flag.StringVar(&backends, "backends", "sqlite,postgres", "databases to measure: sqlite, postgres")
	flag.StringVar(&runners, "runners", "noop,a0,kube,replicas,console", "runners to measure: "+strings.Join(runnerNames, ", ")+" (the scale and curve series need noop, the real fan-out a0; replicas: cross-replica watch latency, PostgreSQL; console: the web console's tree drawing in headless Chromium)")
	flag.StringVar(&o.managerBin, "manager", "", "a flyte-manager built with -tags bench (default: build one)")
	flag.StringVar(&o.beforeBin, "before", "", "another flyte-manager built with -tags bench (main before a change) to measure first in each noop and a0 scenario, one after the other on the same machine; its figures are printed beside")
	flag.StringVar(&o.venv, "venv", "", "virtualenv with the flyte SDK for the a0 runner (default: $FM_TEST_VENV, else .venv)")
	flag.StringVar(&o.pprofDir, "pprof", "", "write the manager's CPU, mutex, block and heap profiles of each noop and a0 scenario's measured runs to this directory")
	flag.IntVar(&o.pgTop, "pg-top", 0, "after the tables, print the N statements PostgreSQL ran most per action in each scenario (pg_stat_statements; 0: none)")
	flag.BoolVar(&o.keep, "keep", false, "keep the managers' homes (logs, databases) instead of removing them")
	flag.DurationVar(&o.timeout, "timeout", 15*time.Minute, "give up on a scenario after this long")
	flag.IntVar(&o.listRuns, "list-runs", 0, "measure only ListRuns paging over this many runs created through the store, e.g. 100000 (listruns.go; 0: the other scenarios)")
	flag.Parse()
	o.backends = splitList(backends)
	o.runners = splitList(runners)
	var err error
	for _, l := range []struct {
		flag string
		s    string
		into *[]int
	}{{"-scale", scale, &o.scale}, {"-curve-fanout", curveFanout, &o.curveFanout}, {"-curve-inflight", curveInflight, &o.curveInflight}} {
		if *l.into, err = splitInts(l.s); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s: %v\n", l.flag, err)
			os.Exit(2)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// splitInts reads "100,1000,10000" (empty: none); every number must be
// positive.
func splitInts(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func run(ctx context.Context, o options) error {
	for _, b := range o.backends {
		if b != "sqlite" && b != "postgres" {
			return fmt.Errorf("-backends: unknown %q (sqlite, postgres)", b)
		}
	}
	for _, r := range o.runners {
		if !slices.Contains(runnerNames, r) {
			return fmt.Errorf("-runners: unknown %q (%s)", r, strings.Join(runnerNames, ", "))
		}
	}
	if !slices.Contains([]string{"on", "off", "both"}, o.warm) {
		return fmt.Errorf("-warm: %q, want on, off or both", o.warm)
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "fm-bench-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintln(os.Stderr, "bench: keeping everything in", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	if o.listRuns > 0 {
		return runListRuns(ctx, o, tmp)
	}
	if o.managerBin == "" {
		fmt.Fprintln(os.Stderr, "bench: building flyte-manager -tags bench")
		if o.managerBin, err = buildManager(ctx, root, tmp); err != nil {
			return err
		}
	}
	if o.pprofDir != "" {
		if err := os.MkdirAll(o.pprofDir, 0o755); err != nil {
			return err
		}
	}
	e := &env{o: o, root: root, tmp: tmp}
	specs := plan(o)

	if slices.Contains(o.runners, "a0") {
		venv := o.venv
		if venv == "" {
			venv = os.Getenv("FM_TEST_VENV")
		}
		if venv == "" {
			venv = filepath.Join(root, ".venv")
		}
		e.venvBin = filepath.Join(venv, "bin")
		for _, exe := range []string{"python", "a0"} {
			if _, err := os.Stat(filepath.Join(e.venvBin, exe)); err != nil {
				return fmt.Errorf("the a0 runner needs the flyte SDK virtualenv (%s): run `make venv`, pass -venv, or -runners noop", filepath.Join(e.venvBin, exe))
			}
		}
		fanouts := []int{min(o.realFanout, defaultRealFanout)} // the warm-up's
		for _, s := range specs {
			if s.runner == "a0" && !slices.Contains(fanouts, s.fanout) {
				fanouts = append(fanouts, s.fanout)
			}
		}
		// The code bundle is read by the attempts, which run as leased
		// users that cannot enter tmp (mode 0700, and hidden by their
		// confinement): it gets a directory of its own that they may read.
		// Nothing in it is secret.
		tasksDir, err := os.MkdirTemp("", "fm-bench-tasks-")
		if err != nil {
			return err
		}
		if o.keep {
			fmt.Fprintln(os.Stderr, "bench: keeping the real tasks in", tasksDir)
		} else {
			defer os.RemoveAll(tasksDir)
		}
		if err := os.Chmod(tasksDir, 0o755); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "bench: building the real fan-out task with the SDK")
		if e.real, err = buildRealTasks(ctx, root, filepath.Join(e.venvBin, "python"), tasksDir, fanouts); err != nil {
			return err
		}
	}

	if slices.Contains(o.backends, "postgres") || slices.Contains(o.runners, "replicas") {
		fmt.Fprintln(os.Stderr, "bench: starting a throwaway PostgreSQL (with pg_stat_statements)")
		if e.pg, err = pgtest.StartWith(pgtest.Options{StatStatements: true}); err != nil {
			return err
		}
		defer e.pg.Stop()
		if e.pgStats, err = openStatStatements(ctx, e.pg); err != nil {
			return err
		}
		if e.pgStats == nil {
			fmt.Fprintln(os.Stderr, "bench: this PostgreSQL has no pg_stat_statements library: statements are counted by the manager only")
		} else {
			defer e.pgStats.Close()
		}
	}

	if slices.Contains(o.runners, "kube") {
		fmt.Fprintln(os.Stderr, "bench: starting the test cluster (noop runner)")
		if e.cluster, err = startKubeCluster(ctx, filepath.Join(tmp, "cluster"), o.backends); err != nil {
			return err
		}
		defer e.cluster.Stop()
	}

	load := loadAverage()
	started := time.Now()
	var results []result
	measured := map[string]result{}
	for i, s := range specs {
		if r, ok := measured[s.key()]; ok {
			r.group = s.group // the same measurement, printed in another table too
			results = append(results, r)
			continue
		}
		fmt.Fprintf(os.Stderr, "bench: [%d/%d] %s: %s / %s: %d runs × (1 + %d) actions, %d in flight ...\n",
			i+1, len(specs), s.group, s.backend, s.label(), s.runs, s.fanout, s.inflight)
		var before *result
		if o.beforeBin != "" && (s.runner == "noop" || s.runner == "a0") {
			fmt.Fprintf(os.Stderr, "bench: first on %s (-before)\n", o.beforeBin)
			b, err := e.measure(ctx, s, o.beforeBin)
			if err != nil {
				return fmt.Errorf("%s / %s on -before's manager: %w", s.backend, s.label(), err)
			}
			fmt.Fprintf(os.Stderr, "bench: before: %s / %s: %.0f actions/s, %.1f statements/action\n", s.backend, s.label(), b.actionsPerSec(), b.perAction(b.stmts))
			before = &b
		}
		r, err := e.measure(ctx, s, o.managerBin)
		r.before = before
		if err != nil {
			if len(results) > 0 { // what was measured before is still worth printing
				report(os.Stdout, o, e, results, load, time.Since(started))
			}
			return fmt.Errorf("%s / %s: %w", s.backend, s.label(), err)
		}
		fmt.Fprintf(os.Stderr, "bench: %s / %s: %.0f actions/s, p50 %s, p99 %s, peak RSS %s, %.1f statements/action (load average now %s)\n",
			s.backend, s.label(), r.actionsPerSec(), round(r.p50), round(r.p99), mb(r.peakRSS), r.perAction(r.stmts), loadAverage())
		measured[s.key()] = r
		results = append(results, r)
	}
	if len(specs) > 0 {
		report(os.Stdout, o, e, results, load, time.Since(started))
	}
	if slices.Contains(o.runners, "replicas") {
		fmt.Fprintf(os.Stderr, "bench: replicas: two managers on one PostgreSQL, %d samples ...\n", o.runs)
		printReplicas, err := runReplicas(ctx, o, tmp, e.pg)
		if err != nil {
			return fmt.Errorf("replicas: %w", err)
		}
		printReplicas(os.Stdout)
	}
	if slices.Contains(o.runners, "console") {
		fmt.Fprintf(os.Stderr, "bench: console: drawing action trees of %v actions in headless Chromium ...\n", consoleSizes)
		printConsole, err := runConsole(ctx, o, tmp)
		if err != nil {
			return fmt.Errorf("console: %w", err)
		}
		printConsole(os.Stdout)
	}
	return nil
}

// loadAverage is /proc/loadavg's 1, 5 and 15 minute figures: the bench
// shares the machine with whatever else runs, and says so.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	default:
		return d.Round(100 * time.Microsecond)
	}
}
