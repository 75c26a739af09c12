package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"fmgr.dev/executor/testcluster"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/internal/pgtest"
)

// env is what every scenario shares.
type env struct {
	o         options
	root, tmp string
	pg        *pgtest.Server       // nil without -backends postgres
	pgStats   *statStatements      // nil when pg does not preload pg_stat_statements
	cluster   *testcluster.Cluster // nil without -runners kube
	venvBin   string               // the SDK virtualenv's bin, for a0
	real      *realTasks           // the a0 workload, nil without -runners a0
	seq       int                  // scenarios started, for their homes' names
}

// result is one scenario's figures.
type result struct {
	spec
	actions    int // actions that exist (roots + children), from ListActions
	succeeded  int // of those, SUCCEEDED
	failedRuns int // runs that did not end SUCCEEDED, or whose watch failed
	wall       time.Duration
	p50, p99   time.Duration
	firstErr   error
	peakRSS    int64         // the manager's VmHWM at the end, bytes
	stmts      statements    // the manager's statements over the measured runs
	pgStmts    statements    // pg_stat_statements of its database over the measured runs; nil if not read
	pgQueries  []queryCalls  // the same, statement by statement, most frequent first
	kube       *kubeFigures  // the kube runner's API writes and transactions
	cpu        cpuTimes      // the manager's and its task processes' CPU over the measured runs
	cpuPG      time.Duration // PostgreSQL's CPU over the measured runs (0: SQLite)
	cpuBench   time.Duration // the bench's own (the client's) CPU over the measured runs
	before     *result       // the same scenario on -before's manager, measured just before; nil without
}

// measuredActions is what the scenario submitted: runs × (1 + fan-out).
func (r result) measuredActions() int { return r.runs * (1 + r.fanout) }

func (r result) actionsPerSec() float64 {
	if r.wall <= 0 {
		return 0
	}
	return float64(r.measuredActions()) / r.wall.Seconds()
}

// perAction is a statement count per submitted action; -1 if not measured.
func (r result) perAction(s statements) float64 {
	if s == nil || r.measuredActions() == 0 {
		return -1
	}
	return s.total() / float64(r.measuredActions())
}

// workloadFor is what a scenario of runner with fanout children submits.
func (e *env) workloadFor(runner string, fanout int) workload {
	switch runner {
	case "kube":
		return kubeWorkload()
	case "a0":
		return e.real.workload(fanout)
	}
	return noopWorkload(fanout)
}

// statsSettle is how long the scenario lets the manager finish the writes
// that follow a run's terminal phase (the executor's bookkeeping) before it
// reads the statement counters.
const statsSettle = time.Second

// measure runs one scenario on a manager of its own.
func (e *env) measure(ctx context.Context, s spec, bin string) (result, error) {
	o := e.o
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	e.seq++
	name := fmt.Sprintf("%02d-%s-%s", e.seq, s.backend, strings.ReplaceAll(s.label(), " ", "-"))
	home := filepath.Join(e.tmp, name)
	if err := os.MkdirAll(home, 0o755); err != nil {
		return result{}, err
	}
	dsn, dbName := "sqlite://"+filepath.Join(home, "fm.db"), fmt.Sprintf("bench_%02d", e.seq)
	if s.backend == "postgres" {
		var err error
		if dsn, err = createDatabase(ctx, e.pg, dbName); err != nil {
			return result{}, err
		}
	}
	kube := s.runner == "kube"
	vars := []string{"FLYTE_MANAGER_BENCH_RUNNER=" + s.runner}
	if kube {
		// The executor is the kubernetes one; the bench build's runner
		// (a local executor's) is not involved.
		vars = kubeEnv(e.cluster, s.backend)
	}
	if e.venvBin != "" {
		vars = append(vars, "FLYTE_MANAGER_EXECUTOR_LOCAL_PYTHON="+e.venvBin)
	}
	if par := parallelismFor(o, s.runner); par > 0 {
		vars = append(vars, fmt.Sprintf("FLYTE_MANAGER_EXECUTOR_LOCAL_MAXPARALLELISM=%d", par))
	}
	configs, err := managerConfig(home, s)
	if err != nil {
		return result{}, err
	}
	profile := o.pprofDir != "" && (s.runner == "noop" || s.runner == "a0")
	m, err := startManager(ctx, bin, home, dsn, vars, configs, profile)
	if err != nil {
		return result{}, err
	}
	defer m.Stop()
	if s.runner == "noop" {
		if log, _ := os.ReadFile(m.LogPath); !strings.Contains(string(log), "attempts run no process") {
			return result{}, fmt.Errorf("%s has no no-op runner: build it with -tags bench", bin)
		}
	}
	c := newClient(m.URL)
	var statsDB *pgtest.Server // the database whose transactions are counted
	if kube && s.backend == "postgres" {
		statsDB = e.pg
	}
	w := e.workloadFor(s.runner, s.fanout)

	if o.warmup > 0 {
		// Warm-up runs are no bigger than the default sizes: a 10,000-child
		// scenario is not preceded by two more.
		small := s.fanout
		switch s.runner {
		case "noop":
			small = min(small, defaultFanout)
		case "a0":
			small = min(small, defaultRealFanout)
		}
		warm, _ := c.submitAll(ctx, e.workloadFor(s.runner, small), "warm", o.warmup, 0)
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
	var before kubeCounters
	if kube {
		fmt.Fprintf(os.Stderr, "bench: %s / %s: waiting %s for the counters to settle\n", s.backend, s.runner, statsFlushWait)
		if err := sleep(ctx, statsFlushWait); err != nil {
			return result{}, err
		}
		if before, err = snapshotKube(ctx, m, e.cluster, statsDB, dbName); err != nil {
			return result{}, err
		}
	} else if err := sleep(ctx, statsSettle); err != nil {
		return result{}, err
	}
	stmtsBefore, err := managerStatements(ctx, m)
	if err != nil {
		return result{}, err
	}
	pgMeasured := e.pgStats != nil && s.backend == "postgres"
	if pgMeasured {
		if err := e.pgStats.reset(ctx); err != nil {
			return result{}, err
		}
	}

	postmaster := 0
	if s.backend == "postgres" && e.pg != nil {
		postmaster = e.pg.PostmasterPID()
	}
	cpuBefore, pgBefore, benchBefore := readCPU(m.PID()), serverCPU(postmaster), selfCPU()
	rs, wall := c.submitAll(ctx, w, "run", s.runs, s.inflight)

	if profile {
		base := filepath.Join(o.pprofDir, name)
		for path, file := range map[string]string{
			"/debug/bench/cpu/stop": base + ".cpu.pprof",
			"/debug/pprof/mutex":    base + ".mutex.pprof",
			"/debug/pprof/block":    base + ".block.pprof",
			"/debug/pprof/heap":     base + ".heap.pprof",
		} {
			if err := m.fetch(ctx, path, file); err != nil {
				return result{}, fmt.Errorf("profile %s: %w", path, err)
			}
		}
		fmt.Fprintf(os.Stderr, "bench: profiles in %s.{cpu,mutex,block,heap}.pprof (go tool pprof -top %s %s.cpu.pprof)\n", base, o.managerBin, base)
	}

	res := result{spec: s, wall: wall}
	if kube {
		if err := sleep(ctx, statsFlushWait); err != nil {
			return result{}, err
		}
		after, err := snapshotKube(ctx, m, e.cluster, statsDB, dbName)
		if err != nil {
			return result{}, err
		}
		res.kube = kubeDelta(before, after, s.runs)
	} else if err := sleep(ctx, statsSettle); err != nil {
		return result{}, err
	}
	stmtsAfter, err := managerStatements(ctx, m)
	if err != nil {
		return result{}, err
	}
	res.stmts = stmtsAfter.minus(stmtsBefore)
	res.cpu = readCPU(m.PID()).minus(cpuBefore)
	res.cpuPG, res.cpuBench = serverCPU(postmaster)-pgBefore, selfCPU()-benchBefore
	if pgMeasured {
		if res.pgStmts, res.pgQueries, err = e.pgStats.read(ctx, dbName); err != nil {
			return result{}, err
		}
	}
	res.peakRSS = peakRSS(m.PID())

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
		a, ok, err := c.verify(ctx, r.name)
		if err != nil {
			return result{}, err
		}
		res.actions += a
		res.succeeded += ok
	}
	lat := latencies(rs)
	res.p50, res.p99 = percentile(lat, 0.50), percentile(lat, 0.99)
	if res.firstErr != nil {
		fmt.Fprintf(os.Stderr, "bench: %s / %s: %d run(s) failed, first: %v (manager log: %s)\n", s.backend, s.label(), res.failedRuns, res.firstErr, m.LogPath)
	}
	return res, nil
}

// managerConfig writes the configuration file a scenario's manager reads,
// if it needs one: executor.local.warmStart for an a0 scenario with warm
// start on. Warm start off writes nothing (the manager's default), so the
// bench also runs against a manager that has no such key.
func managerConfig(home string, s spec) ([]string, error) {
	if s.warm != "on" {
		return nil, nil
	}
	path := filepath.Join(home, "bench-config.yaml")
	if err := os.WriteFile(path, []byte("executor:\n  local:\n    warmStart: true\n"), 0o644); err != nil {
		return nil, err
	}
	return []string{path}, nil
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
