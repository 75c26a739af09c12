// Package apps runs apps' replicas for the local executor
// (appruntime.Runtime) and serves them at the manager's address (proxy.go).
//
// Each replica is a supervised host process (package process) started with
// the app's command (the SDK's `fserve ...`, or the user's), in a
// directory of its own, as a user leased like an attempt's (package runas:
// a uid of its own and the attempts' mount namespace when the manager is
// root), with the environment the SDK's serve runtime reads, and a network
// of its own where the host allows it (network.go: the app binds its
// spec's port; else a free port in PORT). A replica is ready once its port
// accepts connections.
//
// One loop reconciles every app about five times a second: it stops what
// a stopped app or an old revision still runs, restarts crashed replicas
// with exponential backoff (after crashLimit crashes in a row, before any
// replica became ready or soon after, the app is FAILED with substate
// CRASH_LOOP and its last lines, until a new revision or an activation),
// scales between min and max replicas by concurrent requests per replica,
// scales down to min (zero included) after scaledown_after without a
// request, and starts a replica for a request that finds none (the request
// waits for it). What it observes goes to the Reporter, which makes it the
// app's conditions.
package apps

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"fmgr.dev/executor/contract"
	"fmgr.dev/executor/local/process"
	"fmgr.dev/executor/local/runas"
	pb "fmgr.dev/gen/go/flyteidl2/app"
	"fmgr.dev/internal/appruntime"
)

// The spec's scaling is read, and the replica count decided, by
// appruntime (scaling.go).
const (
	// crashLimit crashes in a row make a crash loop.
	crashLimit = 5
	// healthyAfter is how long a ready replica must live for its crash
	// count to start again from zero.
	healthyAfter = 30 * time.Second
	maxBackoff   = 30 * time.Second
	tick         = 200 * time.Millisecond
	// keptLogs is how many ended replicas' logs each app keeps.
	keptLogs = 5
)

// Config is what the runtime needs of the executor.
type Config struct {
	// Dir holds the replicas' directories and logs.
	Dir string
	// Runner starts the replicas' processes; nil until the executor
	// started (nothing runs until then).
	Runner func() *process.Runner
	Users  *runas.Leaser
	// Endpoint is the manager's host:port as replicas reach it ("" until
	// the server listens).
	Endpoint func() string
	// Env are the operator's and the storage's variables for every
	// replica; Host and PassThrough as for attempts.
	Env         []contract.KV
	Host        []string
	PassThrough []string
	// RawDataPrefix is where an app's replicas write data, for
	// {{.rawOutputDataPrefix}} in their command (the app's key is added).
	RawDataPrefix string
	// Holding reports whether this manager runs the executor (it holds the
	// executor lease); only then do replicas run.
	Holding  func() bool
	Reporter appruntime.Reporter
	Log      *slog.Logger
	// Secrets looks up the values of the secrets an app requests (its
	// spec's security context) in its project and domain; a name missing
	// from the map does not exist. nil: an app that requests secrets
	// does not start.
	Secrets func(ctx context.Context, k appruntime.Key, names []string) (map[string][]byte, error)
	// StorageKey, when set, mints the storage credentials of one replica
	// of k, whose data goes under prefix: a key that writes only there
	// (secrets.go). Env then holds none.
	StorageKey func(k appruntime.Key, prefix string) ([]contract.Secret, error)
	// Credential, when set (auth.mode required), is the app's credential
	// its replicas call the API with (internal/appcred), delivered like a
	// secret (contract.EnvTaskToken) and read by the SDK through its
	// ExternalCommand auth, as an attempt's is; TLS and Auth are the
	// replica's side of it.
	Credential func(k appruntime.Key) string
	TLS        bool
	Auth       *contract.TaskAuth
	// Network is how replicas are networked (network.go): NetworkAuto
	// ("" too), NetworkHost or NetworkNamespace.
	Network string
	// Backoff is the first restart delay of a crashed replica (doubling
	// up to maxBackoff); 0 means a second.
	Backoff time.Duration
}

// Runtime runs apps' replicas. It implements appruntime.Runtime.
type Runtime struct {
	appruntime.SyncGate
	cfg  Config
	wake chan struct{}

	mu   sync.Mutex
	apps map[appruntime.Key]*appState

	// How replicas are networked, decided once (useNamespaces).
	netOnce sync.Once
	netNS   bool
	netErr  error
}

var _ appruntime.Runtime = (*Runtime)(nil)

// New returns a runtime; Run runs it.
func New(cfg Config) *Runtime {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if cfg.Holding == nil {
		cfg.Holding = func() bool { return true }
	}
	return &Runtime{cfg: cfg, wake: make(chan struct{}, 1), apps: map[appruntime.Key]*appState{}}
}

// appState is one app as the runtime knows it.
type appState struct {
	key      appruntime.Key
	target   appruntime.Target
	removed  bool
	replicas []*replica
	ended    []*replica // the last keptLogs replicas that ended, oldest first
	serial   int        // names replicas
	// scale is the replica count decision and the requests it hears of.
	scale appruntime.Scale
	// crashes counts crashes in a row; failed is the crash loop's report.
	crashes      int
	failed       *appruntime.Report
	backoffUntil time.Time
	lastCrash    string
	// ready is closed (and replaced) whenever a replica becomes ready or
	// the app can no longer serve, waking requests that wait.
	ready      chan struct{}
	lastReport appruntime.Report
	reported   bool
}

func (a *appState) broadcast() {
	close(a.ready)
	a.ready = make(chan struct{})
}

// Apply records what the app should be; the loop acts on it.
func (r *Runtime) Apply(t appruntime.Target) {
	r.mu.Lock()
	a := r.apps[t.Key]
	if a == nil {
		a = &appState{key: t.Key, ready: make(chan struct{})}
		r.apps[t.Key] = a
	}
	if a.target.Revision != t.Revision || a.target.Spec == nil {
		a.crashes, a.failed, a.backoffUntil, a.reported = 0, nil, time.Time{}, false
		a.scale.Reset(t.Spec, time.Now())
	}
	a.target = t
	a.removed = false
	r.mu.Unlock()
	r.poke()
}

// Remove stops the app's replicas and forgets it.
func (r *Runtime) Remove(k appruntime.Key) {
	r.mu.Lock()
	if a := r.apps[k]; a != nil {
		a.removed = true
	}
	r.mu.Unlock()
	r.poke()
}

func (r *Runtime) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run reconciles the apps until ctx ends, then stops every replica.
func (r *Runtime) Run(ctx context.Context) error {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		r.reconcileAll(ctx)
		select {
		case <-ctx.Done():
			r.stopAll()
			return nil
		case <-t.C:
		case <-r.wake:
		}
	}
}

func (r *Runtime) stopAll() {
	r.mu.Lock()
	var all []*replica
	for _, a := range r.apps {
		all = append(all, a.replicas...)
		a.replicas = nil
	}
	r.mu.Unlock()
	for _, rep := range all {
		r.stopReplica(rep, "the manager is shutting down")
	}
	for _, rep := range all {
		<-rep.proc.Done()
	}
}

func (r *Runtime) reconcileAll(ctx context.Context) {
	r.mu.Lock()
	apps := make([]*appState, 0, len(r.apps))
	for _, a := range r.apps {
		apps = append(apps, a)
	}
	r.mu.Unlock()
	if r.cfg.Runner() == nil {
		return
	}
	holding := r.cfg.Holding()
	for _, a := range apps {
		rep, send := r.reconcile(a, holding)
		if send && ctx.Err() == nil {
			if err := r.cfg.Reporter.Report(ctx, rep); err != nil {
				r.cfg.Log.Warn("recording an app's status (will retry)", "app", a.key.String(), "err", err)
				r.mu.Lock()
				a.reported = false
				r.mu.Unlock()
			}
		}
	}
}

// reconcile moves one app toward its target and returns the report of how
// it is, and whether it is news.
func (r *Runtime) reconcile(a *appState, holding bool) (appruntime.Report, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	t := a.target
	spec := t.Spec
	// Replicas that ended on their own crashed (a server does not exit).
	for _, rep := range a.replicas {
		if rep.proc.Finished() && !rep.stopping {
			r.crashed(a, rep, now)
		}
	}
	a.replicas = r.dropEnded(a)

	switch {
	case a.removed || !t.Active() || !holding:
		for _, rep := range a.replicas {
			r.stopReplicaLocked(a, rep, "the app was stopped")
		}
		a.replicas = r.dropEnded(a)
		a.broadcast()
		if a.removed {
			if len(a.replicas) == 0 {
				delete(r.apps, a.key)
				_ = os.RemoveAll(r.appDir(a.key)) // the kept logs
			}
			return appruntime.Report{}, false
		}
		if !holding {
			return appruntime.Report{}, false
		}
		return a.report(appruntime.Report{Status: pb.Status_DEPLOYMENT_STATUS_STOPPED, Message: "stopped", Replicas: 0})
	}
	// An old revision's replicas make way for the new one's.
	for _, rep := range a.replicas {
		if rep.revision != t.Revision {
			r.stopReplicaLocked(a, rep, "a new revision was deployed")
		}
	}
	if a.failed != nil {
		a.broadcast()
		return a.report(*a.failed)
	}

	ready := 0
	for _, rep := range a.replicas {
		if rep.ready && !rep.stopping {
			ready++
		}
	}
	a.scale.Decide(spec, ready, now)

	live := 0
	for _, rep := range a.replicas {
		if !rep.stopping && rep.revision == t.Revision {
			live++
		}
	}
	for live > a.scale.Want {
		if rep := a.idlest(); rep != nil {
			r.stopReplicaLocked(a, rep, "scaled down")
		}
		live--
	}
	var startErr string
	if live < a.scale.Want && !now.Before(a.backoffUntil) {
		for ; live < a.scale.Want; live++ {
			if err := r.startReplica(a); err != nil {
				if errors.Is(err, errTargetChanged) {
					r.poke() // reconcile what it is now, without a report of what it was
					return appruntime.Report{}, false
				}
				startErr = err.Error()
				r.cfg.Log.Warn("starting an app replica", "app", a.key.String(), "err", err)
				a.backoffUntil = now.Add(r.backoff(a.crashes + 1))
				a.crashes++
				a.lastCrash = startErr
				break
			}
		}
	}
	if a.crashes >= crashLimit {
		a.failed = &appruntime.Report{Status: pb.Status_DEPLOYMENT_STATUS_FAILED, Substate: pb.Status_CRASH_LOOP,
			Message: crashLoopMessage(a.crashes, a.lastCrash)}
		for _, rep := range a.replicas {
			r.stopReplicaLocked(a, rep, "crash loop")
		}
		a.broadcast()
		return a.report(*a.failed)
	}
	// Which replicas became ready.
	for _, rep := range a.replicas {
		if !rep.ready && !rep.stopping && rep.revision == t.Revision && rep.probe() {
			rep.ready, rep.readyAt = true, now
			a.scale.EverReady = true
			a.scale.LastRequest = now // idle counts from here
			ready++
			a.broadcast()
		}
		if rep.ready && a.crashes > 0 && now.Sub(rep.readyAt) > healthyAfter {
			a.crashes = 0
		}
	}
	switch {
	case ready > 0:
		return a.report(appruntime.Report{Status: pb.Status_DEPLOYMENT_STATUS_ACTIVE, Substate: pb.Status_RUNNING,
			Message: plural(ready, "replica serves", "replicas serve"), Replicas: uint32(ready)})
	case a.scale.Want == 0 && a.scale.EverReady:
		return a.report(appruntime.Report{Status: pb.Status_DEPLOYMENT_STATUS_ACTIVE, Substate: pb.Status_SCALED_TO_ZERO,
			Message: "scaled to zero while idle; the next request starts a replica"})
	case a.scale.EverReady:
		return a.report(appruntime.Report{Status: pb.Status_DEPLOYMENT_STATUS_ACTIVE, Substate: pb.Status_SCALING_FROM_ZERO,
			Message: "starting a replica for a request"})
	case a.crashes > 0:
		return a.report(appruntime.Report{Status: pb.Status_DEPLOYMENT_STATUS_DEPLOYING, Substate: pb.Status_CRASH_LOOP,
			Message: "a replica crashed; restarting it: " + lastLine(a.lastCrash)})
	}
	return a.report(appruntime.Report{Status: pb.Status_DEPLOYMENT_STATUS_DEPLOYING, Substate: pb.Status_INITIALIZING,
		Message: "starting; waiting for the app to listen on its port"})
}

// report fills rep's identity and says whether it differs from the last.
func (a *appState) report(rep appruntime.Report) (appruntime.Report, bool) {
	rep.Key, rep.Revision = a.key, a.target.Revision
	news := !a.reported || rep != a.lastReport
	a.lastReport, a.reported = rep, true
	return rep, news
}

// crashed records a replica that ended without being stopped.
func (r *Runtime) crashed(a *appState, rep *replica, now time.Time) {
	st := rep.proc.Wait()
	a.crashes++
	a.lastCrash = exitSummary(st)
	a.backoffUntil = now.Add(r.backoff(a.crashes))
	r.cfg.Log.Warn("an app replica ended", "app", a.key.String(), "replica", rep.name, "crashes", a.crashes, "exit", st.Code, "signal", st.Signal)
}

// dropEnded moves replicas whose process ended to the kept logs.
func (r *Runtime) dropEnded(a *appState) []*replica {
	live := a.replicas[:0]
	for _, rep := range a.replicas {
		if !rep.proc.Finished() {
			live = append(live, rep)
			continue
		}
		r.release(rep)
		a.ended = append(a.ended, rep)
	}
	for len(a.ended) > keptLogs {
		_ = os.RemoveAll(a.ended[0].root)
		a.ended = a.ended[1:]
	}
	return live
}

// idlest is the live replica with the fewest requests in flight.
func (a *appState) idlest() *replica {
	var best *replica
	for _, rep := range a.replicas {
		if rep.stopping {
			continue
		}
		if best == nil || rep.inflight < best.inflight || (rep.inflight == best.inflight && !rep.ready) {
			best = rep
		}
	}
	return best
}

func (r *Runtime) backoff(crashes int) time.Duration {
	d := r.cfg.Backoff
	for i := 1; i < crashes && d < maxBackoff; i++ {
		d *= 2
	}
	if d > maxBackoff {
		d = maxBackoff
	}
	return d
}

// appDir is where an app's replicas live.
func (r *Runtime) appDir(k appruntime.Key) string {
	org := k.Org
	if org == "" {
		org = "_"
	}
	return filepath.Join(r.cfg.Dir, org, k.Project, k.Domain, k.Name)
}
