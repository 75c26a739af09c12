// Command bench measures flyte-manager through its public API: it starts
// the manager (built with -tags bench) on a fresh SQLite database and on a
// fresh PostgreSQL database, submits runs whose root fans out to children
// with RunService.CreateRun (task spec and inputs inline), follows each with
// WatchActionDetails, and prints actions per second and the submit →
// terminal latency of runs (p50, p99), for two runners:
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
// It prints figures; it asserts nothing about time.
//
//	go run ./bench [-runs 100 -fanout 20] [-real-runs 4 -real-fanout 8] [-kube-runs 200 -kube-inflight 20]
//	    [-backends sqlite,postgres] [-runners noop,a0,kube,replicas]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"fmgr.dev/executor/testcluster"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/internal/pgtest"
)

type options struct {
	runs, fanout         int
	realRuns, realFanout int
	kubeRuns             int
	kubeInflight         int
	warmup               int
	inflight             int
	parallelism          int
	backends, runners    []string
	managerBin           string
	venv                 string
	pprofDir             string
	keep                 bool
	timeout              time.Duration
}

// result is one scenario's figures.
type result struct {
	backend, runner string
	runs, fanout    int
	actions         int // actions that exist (roots + children), from ListActions
	succeeded       int // of those, SUCCEEDED
	failedRuns      int // runs that did not end SUCCEEDED, or whose watch failed
	wall            time.Duration
	p50, p99        time.Duration
	firstErr        error
	inflight        int          // runs in flight at once
	kube            *kubeFigures // the kube runner's API writes and transactions
}

func (r result) actionsPerSec() float64 {
	if r.wall <= 0 {
		return 0
	}
	return float64(r.runs*(1+r.fanout)) / r.wall.Seconds()
}

func main() {
	var o options
	var backends, runners string
	flag.IntVar(&o.runs, "runs", 100, "runs per noop scenario")
	flag.IntVar(&o.fanout, "fanout", 20, "children per run in noop scenarios")
	flag.IntVar(&o.realRuns, "real-runs", 4, "runs per a0 scenario (each action is a Python process)")
	flag.IntVar(&o.realFanout, "real-fanout", 8, "children per run in a0 scenarios")
	flag.IntVar(&o.kubeRuns, "kube-runs", 200, "runs per kube scenario (each a single action, one Pod)")
	flag.IntVar(&o.kubeInflight, "kube-inflight", 20, "runs in flight at once in kube scenarios (0: submit all at once)")
	flag.IntVar(&o.warmup, "warmup", 2, "runs submitted (and not measured) before each scenario's measured runs")
	flag.IntVar(&o.inflight, "inflight", 0, "runs in flight at once in noop and a0 scenarios (0: submit all at once)")
	flag.IntVar(&o.parallelism, "parallelism", 0, "executor.local.maxParallelism of the manager (0: 256 for noop, the manager's default 2 × CPUs for a0)")
	flag.StringVar(&backends, "backends", "sqlite,postgres", "databases to measure: sqlite, postgres")
	flag.StringVar(&runners, "runners", "noop,a0,kube,replicas", "runners to measure: noop, a0, kube, replicas (cross-replica watch latency, PostgreSQL)")
	flag.StringVar(&o.managerBin, "manager", "", "a flyte-manager built with -tags bench (default: build one)")
	flag.StringVar(&o.venv, "venv", "", "virtualenv with the flyte SDK for the a0 runner (default: $FM_TEST_VENV, else .venv)")
	flag.StringVar(&o.pprofDir, "pprof", "", "write the manager's CPU, mutex and block profiles of each noop scenario's measured runs to this directory")
	flag.BoolVar(&o.keep, "keep", false, "keep the managers' homes (logs, databases) instead of removing them")
	flag.DurationVar(&o.timeout, "timeout", 15*time.Minute, "give up on a scenario after this long")
	flag.Parse()
	o.backends = splitList(backends)
	o.runners = splitList(runners)

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

func run(ctx context.Context, o options) error {
	for _, b := range o.backends {
		if b != "sqlite" && b != "postgres" {
			return fmt.Errorf("-backends: unknown %q (sqlite, postgres)", b)
		}
	}
	for _, r := range o.runners {
		if r != "noop" && r != "a0" && r != "kube" && r != "replicas" {
			return fmt.Errorf("-runners: unknown %q (noop, a0, kube, replicas)", r)
		}
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

	workloads := map[string]workload{}
	var venvBin string
	for _, r := range o.runners {
		switch r {
		case "noop":
			workloads[r] = noopWorkload(o.fanout)
		case "kube":
			workloads[r] = kubeWorkload()
		case "a0":
			venv := o.venv
			if venv == "" {
				venv = os.Getenv("FM_TEST_VENV")
			}
			if venv == "" {
				venv = filepath.Join(root, ".venv")
			}
			venvBin = filepath.Join(venv, "bin")
			for _, exe := range []string{"python", "a0"} {
				if _, err := os.Stat(filepath.Join(venvBin, exe)); err != nil {
					return fmt.Errorf("the a0 runner needs the flyte SDK virtualenv (%s): run `make venv`, pass -venv, or -runners noop", filepath.Join(venvBin, exe))
				}
			}
			fmt.Fprintln(os.Stderr, "bench: building the real fan-out task with the SDK")
			w, err := realWorkload(ctx, root, filepath.Join(venvBin, "python"), filepath.Join(tmp, "realtasks"), o.realFanout)
			if err != nil {
				return err
			}
			workloads[r] = w
		}
	}

	var pg *pgtest.Server
	if slices.Contains(o.backends, "postgres") || slices.Contains(o.runners, "replicas") {
		fmt.Fprintln(os.Stderr, "bench: starting a throwaway PostgreSQL")
		if pg, err = pgtest.Start(); err != nil {
			return err
		}
		defer pg.Stop()
	}

	var cluster *testcluster.Cluster
	if slices.Contains(o.runners, "kube") {
		fmt.Fprintln(os.Stderr, "bench: starting the test cluster (noop runner)")
		if cluster, err = startKubeCluster(ctx, filepath.Join(tmp, "cluster"), o.backends); err != nil {
			return err
		}
		defer cluster.Stop()
	}

	load := loadAverage()
	var results []result
	for _, b := range o.backends {
		for _, r := range slices.DeleteFunc(slices.Clone(o.runners), func(r string) bool { return r == "replicas" }) {
			runs := o.runs
			switch r {
			case "a0":
				runs = o.realRuns
			case "kube":
				runs = o.kubeRuns
			}
			fmt.Fprintf(os.Stderr, "bench: %s / %s: %d runs × (1 + %d) actions ...\n", b, r, runs, workloads[r].fanout)
			res, err := scenario(ctx, o, tmp, pg, cluster, b, r, runs, venvBin, workloads[r])
			if err != nil {
				return fmt.Errorf("%s / %s: %w", b, r, err)
			}
			fmt.Fprintf(os.Stderr, "bench: %s / %s: %.0f actions/s, p50 %s, p99 %s (load average now %s)\n",
				b, r, res.actionsPerSec(), round(res.p50), round(res.p99), loadAverage())
			results = append(results, res)
		}
	}
	report(os.Stdout, o, results, load)
	if slices.Contains(o.runners, "replicas") {
		fmt.Fprintf(os.Stderr, "bench: replicas: two managers on one PostgreSQL, %d samples ...\n", o.runs)
		printReplicas, err := runReplicas(ctx, o, tmp, pg)
		if err != nil {
			return fmt.Errorf("replicas: %w", err)
		}
		printReplicas(os.Stdout)
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

// scenario measures one backend × runner on a manager of its own.
func scenario(ctx context.Context, o options, tmp string, pg *pgtest.Server, cluster *testcluster.Cluster, backend, runner string, runs int, venvBin string, w workload) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	home := filepath.Join(tmp, backend+"-"+runner)
	if err := os.MkdirAll(home, 0o755); err != nil {
		return result{}, err
	}
	dsn, db := "sqlite://"+filepath.Join(home, "fm.db"), "bench_"+runner
	if backend == "postgres" {
		var err error
		if dsn, err = createDatabase(ctx, pg, db); err != nil {
			return result{}, err
		}
	}
	kube := runner == "kube"
	env := []string{"FLYTE_MANAGER_BENCH_RUNNER=" + runner}
	if kube {
		// The executor is the kubernetes one; the bench build's runner
		// (a local executor's) is not involved.
		env = kubeEnv(cluster, backend)
	}
	if venvBin != "" {
		env = append(env, "FLYTE_MANAGER_EXECUTOR_LOCAL_PYTHON="+venvBin)
	}
	if par := parallelismFor(o, runner); par > 0 {
		env = append(env, fmt.Sprintf("FLYTE_MANAGER_EXECUTOR_LOCAL_MAXPARALLELISM=%d", par))
	}
	profile := o.pprofDir != "" && runner == "noop"
	m, err := startManager(ctx, o.managerBin, home, dsn, env, profile)
	if err != nil {
		return result{}, err
	}
	defer m.Stop()
	if runner == "noop" {
		if log, _ := os.ReadFile(m.LogPath); !strings.Contains(string(log), "attempts run no process") {
			return result{}, fmt.Errorf("%s has no no-op runner: build it with -tags bench", o.managerBin)
		}
	}
	c := newClient(m.URL)
	var statsDB *pgtest.Server // the database whose transactions are counted
	if kube && backend == "postgres" {
		statsDB = pg
	}

	if o.warmup > 0 {
		warm, _ := c.submitAll(ctx, w, "warm", o.warmup, 0)
		for _, r := range warm {
			if r.err != nil {
				return result{}, fmt.Errorf("warm-up run: %w (manager log: %s)", r.err, m.LogPath)
			}
		}
	}
	if profile {
		if err := m.fetch(ctx, "/debug/bench/cpu/start", os.DevNull); err != nil {
			return result{}, err
		}
	}
	inflight := o.inflight
	if kube {
		inflight = o.kubeInflight
	}
	var before kubeCounters
	if kube {
		fmt.Fprintf(os.Stderr, "bench: %s / %s: waiting %s for the counters to settle\n", backend, runner, statsFlushWait)
		if err := sleep(ctx, statsFlushWait); err != nil {
			return result{}, err
		}
		if before, err = snapshotKube(ctx, m, cluster, statsDB, db); err != nil {
			return result{}, err
		}
	}
	rs, wall := c.submitAll(ctx, w, "run", runs, inflight)
	if profile {
		base := filepath.Join(o.pprofDir, backend+"-"+runner)
		for path, file := range map[string]string{
			"/debug/bench/cpu/stop": base + ".cpu.pprof",
			"/debug/pprof/mutex":    base + ".mutex.pprof",
			"/debug/pprof/block":    base + ".block.pprof",
		} {
			if err := m.fetch(ctx, path, file); err != nil {
				return result{}, fmt.Errorf("profile %s: %w", path, err)
			}
		}
		fmt.Fprintf(os.Stderr, "bench: profiles in %s.{cpu,mutex,block}.pprof (go tool pprof -top %s %s.cpu.pprof)\n", base, o.managerBin, base)
	}

	res := result{backend: backend, runner: runner, runs: runs, fanout: w.fanout, wall: wall, inflight: inflight}
	if kube {
		if err := sleep(ctx, statsFlushWait); err != nil {
			return result{}, err
		}
		after, err := snapshotKube(ctx, m, cluster, statsDB, db)
		if err != nil {
			return result{}, err
		}
		res.kube = kubeDelta(before, after, runs)
	}
	for _, r := range rs {
		if r.err == nil && r.phase != common.ActionPhase_ACTION_PHASE_SUCCEEDED {
			r.err = fmt.Errorf("run %s ended %s", r.name, r.phase)
		}
		if r.err != nil {
			res.failedRuns++
			if res.firstErr == nil {
				res.firstErr = r.err
			}
		}
	}
	for _, r := range rs {
		a, s, err := c.verify(ctx, r.name)
		if err != nil {
			return result{}, err
		}
		res.actions += a
		res.succeeded += s
	}
	lat := latencies(rs)
	res.p50, res.p99 = percentile(lat, 0.50), percentile(lat, 0.99)
	if res.firstErr != nil {
		fmt.Fprintf(os.Stderr, "bench: %s / %s: %d run(s) failed, first: %v (manager log: %s)\n", backend, runner, res.failedRuns, res.firstErr, m.LogPath)
	}
	return res, nil
}

// noopParallelism is the executor's slot count for no-op attempts unless
// -parallelism says otherwise: maxParallelism protects the host from too
// many task processes, and no-op attempts start none, so the control plane
// is measured without that limit in the way.
const noopParallelism = 256

// parallelismFor is the executor.local.maxParallelism a scenario runs with
// (0: the manager's default, 2 × CPUs).
func parallelismFor(o options, runner string) int {
	if o.parallelism > 0 {
		return o.parallelism
	}
	if runner == "noop" {
		return noopParallelism
	}
	return 0
}

// report prints the table and the ratios.
func report(out *os.File, o options, results []result, load string) {
	par := fmt.Sprintf("noop %d, a0 its default (2 × CPUs)", noopParallelism)
	if o.parallelism > 0 {
		par = fmt.Sprint(o.parallelism)
	}
	fmt.Fprintf(out, "\nflyte-manager bench (%s, %d CPUs, load average before: %s; executor.local.maxParallelism: %s)\n\n",
		time.Now().Format(time.DateOnly), runtime.NumCPU(), load, par)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "backend\trunner\truns\tfan-out\tactions\tsucceeded\twall\tactions/s\tp50\tp99\tfailed runs\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%.1f\t%s\t%s\t%d\t\n", r.backend, r.runner, r.runs, r.fanout,
			r.actions, r.succeeded, round(r.wall), r.actionsPerSec(), round(r.p50), round(r.p99), r.failedRuns)
	}
	tw.Flush()
	find := func(b, r string) *result {
		for i := range results {
			if results[i].backend == b && results[i].runner == r {
				return &results[i]
			}
		}
		return nil
	}
	var lines []string
	for _, b := range o.backends {
		if n, a := find(b, "noop"), find(b, "a0"); n != nil && a != nil && a.actionsPerSec() > 0 {
			lines = append(lines, fmt.Sprintf("  %-8s noop/a0 actions/s: %.1f×  (control plane vs. real task processes)", b, n.actionsPerSec()/a.actionsPerSec()))
		}
	}
	for _, r := range o.runners {
		if s, p := find("sqlite", r), find("postgres", r); s != nil && p != nil && p.actionsPerSec() > 0 {
			lines = append(lines, fmt.Sprintf("  %-8s sqlite/postgres actions/s: %.2f×  p50 %s vs %s", r, s.actionsPerSec()/p.actionsPerSec(), round(s.p50), round(p.p50)))
		}
	}
	if len(lines) > 0 {
		fmt.Fprintln(out, "\nratios:")
		for _, l := range lines {
			fmt.Fprintln(out, l)
		}
	}
	reportKube(out, results)
	fmt.Fprintln(out, "\nactions = roots + children that exist after the runs (ListActions); actions/s = runs × (1 + fan-out) / wall;")
	fmt.Fprintln(out, "wall = first CreateRun sent → last root seen terminal on WatchActionDetails; p50/p99 = that per run.")
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
