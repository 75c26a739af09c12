// Package local is the local executor driver: it runs every attempt of every
// task action as a host process (package process) under the task-process
// contract (package contract), decides what happens next with the state
// machine (package machine), and records every status change in the run
// state (package runstate), whose store it is the one writer of executor
// status for.
//
// Work reaches the driver from Submit and Abort (called by the run state),
// from a scan of every unfinished action when it starts, and from a periodic
// resync scan, through one deduplicating, rate-limited work queue. A few
// workers reconcile queued keys against the store; each running attempt has
// a goroutine that waits for its process and queues the key again when it
// exits, so every store write for a key happens in the worker that holds
// the key.
//
// Restart safety: an attempt is claimed with an optimistic-concurrency write
// (QUEUED → INITIALIZING) before its process starts, and the process
// group's identity is written durably to process.json in the attempt's
// directory before the attempt is marked RUNNING. A manager that finds an
// action INITIALIZING or RUNNING that it did not start itself stops whatever
// is left of that attempt (the recorded process group, and any process still
// working in the attempt's directory), waits until it is gone, and only then
// records it: from the outputs or error file the attempt completely wrote
// before it died (it ended; running it again would repeat its side
// effects), or else as machine.Orphaned, which retries the action as a new
// attempt (or fails it when the system retry budget is spent). No attempt is
// ever started while an earlier attempt of the same action may still run.
//
// Several managers on one database: only the holder of the executor lease
// starts and records attempts, with every write fenced by the lease's token;
// the others stay on standby until the lease is free or expired (lease.go).
package local

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/lease"
	"fmgr.dev/executor/local/process"
	"fmgr.dev/executor/local/runas"
	"fmgr.dev/executor/machine"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/images"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/store"
)

// Defaults of the driver's tunables.
const (
	DefaultResyncInterval = 15 * time.Second
	DefaultKillGrace      = 10 * time.Second
	DefaultStopTimeout    = 20 * time.Second
	DefaultLeaseTTL       = 15 * time.Second
	// Each worker makes one store call at a time, and concurrent writes
	// share a transaction (the store's group commit): with 4 workers the
	// batches held 1.8 writes on average in the no-op bench, with 16 about
	// 5, at two to three times the actions/s. Workers wait on the database
	// almost all the time; slots, not workers, bound the task processes.
	defaultWorkers = 16
	// defaultWaitGrace is how long an action may wait for capacity before
	// WAITING_FOR_RESOURCES is recorded. Most waits in a busy manager end
	// within milliseconds (a slot frees as another attempt ends): writing
	// the phase for them cost a store write each and showed nothing a
	// user could see. A wait that lasts is still recorded, shortly after
	// it began.
	defaultWaitGrace = 150 * time.Millisecond
	// The work queue's rate limit, in reconciles per second. An action
	// takes about 3.4 reconciles (QUEUED, waiting for a slot, started,
	// ended), so this caps the whole executor near defaultQPS/3.4 actions
	// per second; at 100 that was ~29 actions/s, the manager's ceiling in
	// `make bench`, and at 1000 it would stop short of 300. The workers
	// already bound the load on the database; the limit only has to stop a
	// runaway requeue loop, so it sits well above what they can do.
	defaultQPS   = 5000
	defaultBurst = 5000
)

// Driver is the local executor. It implements runstate.Executor.
type Driver struct {
	envState // the image environments (imageenv.go)

	state    *runstate.Service
	cfg      config.LocalExecutor
	endpoint func() string
	log      *slog.Logger
	logLinks logLinker // executor.local.logLinks

	// Tunables, fixed before Start (tests shorten them).
	resyncInterval time.Duration
	killGrace      time.Duration
	stopTimeout    time.Duration
	systemBackoff  machine.Backoff
	workers        int

	hooks  attempt.Hooks // the services that join planning (WithHooks)
	core   *attempt.Core // built in Start, once the tunables are fixed
	runner *process.Runner
	// runAttempt runs claimed attempts: defaultRunner, host processes
	// through runner (or the bench build's no-op runner).
	runAttempt attemptRunner
	metrics    *metrics
	lease      *lease.Keeper
	rescan     chan struct{} // asks the resync loop for a scan now
	// leaseStop stops keepLease, which outlives the workers at shutdown
	// (the lease must hold while running attempts are recorded); leaseDone
	// is closed when it returned.
	leaseStop, leaseDone chan struct{}
	scans                atomic.Int64 // completed resync scans (tests wait on it)
	q                    *queue
	lim                  *limiter
	slots                *attempt.Slots
	resources            *resourcePool // the host's share running attempts hold
	users                *runas.Leaser // who attempts run as (runas.go)
	unsatisfiableFails   bool          // executor.local.resources.unsatisfiable is fail
	runc                 runcRuntime   // raw containers' runtime, found at first use (runc.go)

	// shippers are the goroutines shipping running attempts' logs
	// (logship.go); logFlush is how long a line may wait to be stored.
	shippers sync.WaitGroup
	logFlush time.Duration

	mu      sync.Mutex
	running map[store.ActionKey]*ownAttempt
	// waitingSince is when a QUEUED action first found no free capacity,
	// until its wait is recorded (see waitGrace) or it starts.
	waitingSince map[store.ActionKey]time.Time
	waitGrace    time.Duration
	// waitRows holds, for an action that waits for capacity, the row as
	// this driver last read or wrote it (its WAITING_FOR_RESOURCES record):
	// the next look at it (its wait to record, a slot freed for it) starts
	// from this row instead of reading it again, and a change the feed
	// brings that is not newer needs no look (followSub). A newer change
	// drops it; a write from a row that moved anyway fails with a conflict,
	// and the look reads the row (reconcile).
	waitRows map[store.ActionKey]*store.Action
	// changedTo is the newest version the change feed brought for a
	// waiting action while no row was held for it (a look was using it):
	// the look does not hold a row older than that.
	changedTo map[store.ActionKey]int64

	life   sync.Mutex
	status lifeStatus
	// servedStandby: the driver was ready on standby before it took the
	// lease. leaseTried: its first try at the lease is over (until then it
	// is not ready, though its status is already lifeStandby).
	servedStandby bool
	leaseTried    bool
	stopCh        chan struct{} // closed when the driver stops taking work
	done          chan struct{} // closed when the driver has stopped
	lockF         *os.File
	workCtx       context.Context
	stopWork      context.CancelFunc
	wg            sync.WaitGroup // workers and the resync loop
	stopOnce      sync.Once
	stopErr       error
}

type lifeStatus int

const (
	lifeNew lifeStatus = iota
	// lifeStandby: started, but another manager holds the executor lease.
	lifeStandby
	lifeRecovering
	lifeReady
	lifeStopping
	lifeStopped
)

var _ runstate.Executor = (*Driver)(nil)

// New builds the driver over the run state. endpoint returns the manager's
// host:port as task processes reach it (known once the server listens); it
// is called for every attempt. runstate.New calls it (see there why), and
// Setup then registers it with the server, which runs it (Run; tests use
// Start/Stop).
func New(state *runstate.Service, cfg config.Executor, endpoint func() string, log *slog.Logger) *Driver {
	if log == nil {
		log = slog.Default()
	}
	local := cfg.Local
	if local.MaxParallelism < 1 {
		local.MaxParallelism = 1
	}
	if local.SystemRetries < 0 {
		local.SystemRetries = 0
	}
	if local.LeaseTTL < config.MinLeaseTTL {
		local.LeaseTTL = DefaultLeaseTTL
	}
	if local.WorkDir != "" {
		if abs, err := filepath.Abs(local.WorkDir); err == nil {
			local.WorkDir = abs
		}
	}
	d := &Driver{
		state:          state,
		cfg:            local,
		endpoint:       endpoint,
		log:            log.With("component", "executor"),
		logLinks:       newLogLinker(local.LogLinks, log),
		resyncInterval: DefaultResyncInterval,
		killGrace:      DefaultKillGrace,
		stopTimeout:    DefaultStopTimeout,
		systemBackoff:  machine.Backoff{Base: time.Second, Factor: 2, Cap: time.Minute},
		workers:        defaultWorkers,
		runAttempt:     defaultRunner,
		q:              newQueue(50*time.Millisecond, 30*time.Second),
		lim:            newLimiter(defaultQPS, defaultBurst),
		slots:          attempt.NewSlots(local.MaxParallelism),
		running:        map[store.ActionKey]*ownAttempt{},
		waitingSince:   map[store.ActionKey]time.Time{},
		waitRows:       map[store.ActionKey]*store.Action{},
		changedTo:      map[store.ActionKey]int64{},
		waitGrace:      defaultWaitGrace,
		stopCh:         make(chan struct{}),
		done:           make(chan struct{}),
		rescan:         make(chan struct{}, 1),
		leaseStop:      make(chan struct{}),
		leaseDone:      make(chan struct{}),
	}
	host, notes := detectHost(local.Resources)
	for _, n := range notes {
		d.log.Warn(n)
	}
	d.resources, d.unsatisfiableFails = newResourcePool(host), local.Resources.Unsatisfiable == config.UnsatisfiableFail
	d.users = runas.New(local.RunAs, os.Geteuid())
	d.lease = lease.New(state.Leases(), local.WorkDir, local.LeaseTTL, d.log, leaseEvents{d})
	d.metrics = newMetrics(d)
	if local.Environments.Dir != "" { // "" (a bare config in tests): no images are built
		d.envs = images.NewStore(local.Environments.Dir, local.Environments.MaxBytes, d.log)
	}
	return d
}

// WithHooks makes the cache and secret services join the planning of
// every attempt; call it before Start.
func (d *Driver) WithHooks(h attempt.Hooks) *Driver {
	d.hooks = h
	return d
}

// Submit says key was created QUEUED (runstate.Executor).
func (d *Driver) Submit(key store.ActionKey) { d.q.add(key) }

// Abort says key was marked for abort (runstate.Executor): a running
// attempt's process tree is stopped at once; the worker then records
// ABORTED.
func (d *Driver) Abort(key store.ActionKey) {
	d.mu.Lock()
	var p *process.Process
	if e := d.running[key]; e != nil {
		e.abort = true
		p = e.proc
	}
	d.mu.Unlock()
	if p != nil {
		p.Abort("abort requested")
	}
	d.q.add(key)
}

// Ready reports whether the driver is ready (for /readyz): started, done
// with the scan of unfinished actions that follows a start, not stopping.
// A driver on standby is ready: readiness gates the API traffic a load
// balancer sends to this manager, which serves the API in full while
// another manager's executor runs the work (LeaseStatus tells them apart).
// For the same reason the recovery scan after a takeover does not turn a
// standby that served the API unready.
func (d *Driver) Ready() error {
	d.life.Lock()
	defer d.life.Unlock()
	switch d.status {
	case lifeNew:
		return errors.New("the executor has not started")
	case lifeStandby:
		if !d.leaseTried {
			return errors.New("the executor has not started")
		}
	case lifeRecovering:
		if d.servedStandby {
			return nil
		}
		return errors.New("the executor is picking up unfinished actions")
	case lifeStopping, lifeStopped:
		return errors.New("the executor is stopping")
	}
	return nil
}

// Run starts the driver and keeps it running until ctx ends, then stops it
// gracefully (see Stop) within DefaultStopTimeout and returns. It fails at
// once when the work directory is unusable or in use by another manager.
func (d *Driver) Run(ctx context.Context) error {
	if err := d.Start(ctx); err != nil {
		return err
	}
	<-d.done
	return d.stopErr
}

// Start takes the work directory, starts the workers and the resync loop
// (whose first scan picks up, and for orphans recovers, everything
// unfinished), and returns. The driver stops gracefully when ctx ends or
// Stop is called.
func (d *Driver) Start(ctx context.Context) error {
	d.life.Lock()
	defer d.life.Unlock()
	if d.status != lifeNew {
		return errors.New("executor: already started")
	}
	if d.cfg.WorkDir == "" {
		return errors.New("executor: executor.local.workDir is not set")
	}
	wd := d.cfg.WorkDir
	f, err := lease.LockDir(wd, lockFile)
	if err != nil {
		return err
	}
	d.lockF = f
	// Detached processes of attempts are re-parented to the manager, so
	// the end of an attempt can find and kill them (process package).
	if err := process.EnableSubreaper(); err != nil {
		d.log.Warn("cannot become a child subreaper: processes an attempt detaches are found by their working directory only", "err", err)
	}
	d.core = attempt.New(d.state, attempt.Options{SystemRetries: uint32(d.cfg.SystemRetries), Cluster: attempt.ClusterLocal,
		SystemBackoff: d.systemBackoff, Fence: d.lease.Fence, Hooks: d.hooks,
		Slots: d.slots, Requeue: d.q.addAfter, Ended: d.forgetWait, Log: d.log, Metrics: d.metrics.core})
	if err := d.openToAttempts(); err != nil {
		_ = f.Close()
		d.lockF = nil
		return err
	}
	// After openToAttempts: its directories take the attempts' group
	// from the environments' directory.
	if d.envs == nil {
		// No environments: tasks run in the manager's own.
	} else if err := d.envs.Prepare(); err != nil {
		_ = f.Close()
		d.lockF = nil
		return err
	}
	d.runner = process.NewRunner(process.Config{BinDir: d.cfg.Python, KillGrace: d.killGrace, MaxLogBytes: d.cfg.MaxLogBytes,
		WarmStart: d.cfg.WarmStart, Logger: d.log, Confine: d.dataDirs()})
	if d.runner.Cgroups() {
		d.log.Info("attempts run in cgroups of their own", "containment", d.runner.Containment())
	} else {
		d.log.Warn("attempts cannot run in cgroups: tasks' resource limits are not enforced", "containment", d.runner.Containment())
	}
	switch d.cfg.Containers.Runtime {
	case config.ContainerRuntimeHost:
		d.log.Warn("raw container tasks run on the host as the manager's user, without their image (executor.local.containers.runtime: host, unsafe)")
	case config.ContainerRuntimeRunc:
		// Found now so that the start's log says whether they can run
		// (runtime logs why not); a launch says it again.
		if rt, err := d.runtime(); err == nil {
			d.log.Info("raw container tasks run in runc", "runc", rt.runc, "images", rt.store.Dir())
		}
	}
	if d.users.Separate() {
		d.log.Info("attempts' user", "runAs", d.users.Describe(), "mountNamespace", d.runner.Confinement())
	} else if d.cfg.RunAs.Mode == config.RunAsManager {
		d.log.Info("attempts' user", "runAs", d.users.Describe())
	} else {
		d.log.Warn("attempts run as the manager's user", "runAs", d.users.Describe())
	}
	d.workCtx, d.stopWork = context.WithCancel(context.WithoutCancel(ctx))
	d.status = lifeStandby
	// One try at the lease before anything runs, so that a lone manager
	// (and a restarted one) is not reported ready before its first scan.
	d.life.Unlock()
	d.lease.Step(d.workCtx)
	d.life.Lock()
	d.leaseTried = true
	if d.status == lifeStandby {
		d.servedStandby = true
		d.log.Info("executor on standby: another manager holds the executor lease", "lease", d.lease.Describe(),
			"leaseTTL", d.cfg.LeaseTTL)
	}
	for range d.workers {
		d.wg.Add(1)
		go d.work()
	}
	d.wg.Add(2)
	go d.resync()
	go d.followChanges()
	go func() { defer close(d.leaseDone); d.lease.Run(d.workCtx, d.leaseStop) }()
	go func() {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.stopTimeout)
			defer cancel()
			_ = d.Stop(sctx)
		case <-d.stopCh:
		}
	}()
	d.log.Info("executor started", "workDir", wd, "python", d.cfg.Python,
		"maxParallelism", d.cfg.MaxParallelism, "systemRetries", d.cfg.SystemRetries, "lease", d.lease.Describe())
	return nil
}

// work is one worker: it reconciles keys until the queue shuts down.
func (d *Driver) work() {
	defer d.wg.Done()
	for {
		key, ok := d.q.get()
		if !ok {
			return
		}
		if !d.lim.wait(d.stopCh) {
			d.q.done(key)
			return
		}
		err := d.reconcile(d.workCtx, key)
		switch {
		case err == nil:
			d.q.forget(key)
		case d.workCtx.Err() != nil:
		case errors.Is(err, attempt.ErrNotWriter):
			d.q.forget(key) // the holder's scan finds it
		case errors.Is(err, errPaused):
			d.q.forget(key) // resumeAttempts queues it again
		case errors.Is(err, store.ErrFenced):
			// Lost the lease: keepLease notices at its next renewal and
			// puts the driver on standby; nothing was written.
			d.q.forget(key)
			d.log.Warn("a write was refused: the executor lease carries another token", "action", key.String())
		default:
			d.log.Warn("reconciling an action (will retry)", "action", key.String(), "err", err)
			d.q.retry(key)
		}
		d.q.done(key)
	}
}

// resync scans the unfinished actions when the driver takes the lease and
// then periodically while it holds it, so nothing is ever stranded (a lost
// Submit, an abort made through another manager, a write that failed). The
// first scan after taking the lease recovers orphans; once it is done the
// driver is ready.
func (d *Driver) resync() {
	defer d.wg.Done()
	for {
		wait := d.resyncInterval
		if tok := d.lease.Fence(); tok != 0 {
			err := d.scan(d.workCtx)
			switch {
			case err != nil && d.workCtx.Err() == nil:
				d.log.Warn("scanning unfinished actions", "err", err)
				wait = time.Second
			case err == nil:
				d.scans.Add(1)
				d.life.Lock()
				if d.status == lifeRecovering && d.lease.Fence() == tok {
					d.status = lifeReady
				}
				d.life.Unlock()
			}
		}
		select {
		case <-d.stopCh:
			return
		case <-d.rescan:
		case <-time.After(wait):
		}
	}
}

// scan queues every unfinished action that needs a look: everything except
// attempts this driver runs and actions waiting for a slot, unless an abort
// was requested for them.
func (d *Driver) scan(ctx context.Context) error {
	n := 0
	err := d.core.Scan(ctx, func(a *store.Action) {
		if a.AbortRequestedAt == nil {
			d.mu.Lock()
			_, mine := d.running[a.ActionKey]
			d.mu.Unlock()
			if mine || d.slots.Waits(a.ActionKey) {
				return
			}
		}
		d.q.add(a.ActionKey)
		n++
	})
	if err != nil {
		return err
	}
	if n > 0 {
		d.log.Debug("resync queued unfinished actions", "count", n)
	}
	return nil
}
