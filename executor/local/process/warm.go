package process

import (
	_ "embed"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Warm start: starting Python and importing the SDK costs far more than a
// small task itself, so the runner keeps a pre-started interpreter (the warm
// server, warm_server.py) that has imported the SDK (its background loops'
// threads deferred to each child; only its dependencies when that cannot be
// done faithfully, see warmModeSDK) and forks one child per attempt. The
// server never receives an attempt: each child ("spare") has its own
// channel to the manager (warm_spare.go), which sends the attempt to that
// child alone, so no later child, forked from the server's memory, can
// find an earlier attempt's environment (its secrets) there. The child
// becomes the attempt's process exactly as an exec'd a0 would: its own
// process group, the attempt's working directory, complete environment and
// stdout/stderr (the pipes' write ends travel by SCM_RIGHTS, so the log
// pumps do not know the difference), Pdeathsig (to the server, which has
// Pdeathsig to the manager's locked thread), the same argv and a0's own
// entry function, so the same exit codes. It joins the attempt's cgroup
// before it runs any task code: it waits for a go that the runner sends
// only after moving it there. The
// server is its parent and reaps it, but only when the runner says so: it
// reports the exit first, and the zombie keeps the pid and the group's
// number from reuse while the runner kills the leftovers (as with a plain
// start). Identity, abort, timeout, pause, KillOrphan work on the child's
// own pid and group unchanged.
//
// An attempt is started plainly (exec, as without warm start) when the warm
// start cannot serve it faithfully:
//   - its argv[0] is not the a0 of BinDir (raw containers, other commands,
//     another environment's a0, so another Python);
//   - its environment differs from the server's in a variable that can
//     change what the imports did: warmFixedNames (read by the interpreter
//     at start-up or by native code at load, which the server cannot
//     observe) and every variable the server's imports read through
//     os.environ (it records them and reports the names);
//   - no server is ready (one is started lazily, and again with backoff
//     after it died or refused), or handing the attempt over failed before
//     any of its code ran.
// Everything else in the environment (FLYTE_*, secrets, the task's own
// variables) is simply set in the child before the task's code runs.

// warmServerSource is the server's program: warm_prepare.py (what it
// prepares before forking) and then warm_server.py (the server, which runs).
var warmServerSource = warmPrepareSource + "\n" + warmServerMain

//go:embed warm_prepare.py
var warmPrepareSource string

//go:embed warm_server.py
var warmServerMain string

// warmFixedNames change what the interpreter or native libraries do at
// start-up or load, before any Python code could record the read:
// PYTHON* (sys.path, flags, hash seed, encodings, unbuffered stdio), LD_*
// and GLIBC_TUNABLES/MALLOC_* (the dynamic loader, the allocator), the
// locale (stdio encodings), TZ (the time module's cached zone), PATH,
// VIRTUAL_ENV and HOME (where programs and site directories are found),
// TMPDIR, FSSPEC_* (fsspec reads its whole configuration from the
// environment at import), GRPC_* and OPENSSL_*/SSL_CERT_* (read by the
// native gRPC and TLS libraries).
var warmFixedNames = []string{
	"PYTHON*", "LD_*", "GLIBC_TUNABLES", "MALLOC_*", "LANG", "LANGUAGE", "LC_*", "TZ",
	"PATH", "VIRTUAL_ENV", "HOME", "TMPDIR", "FSSPEC_*", "GRPC_*", "OPENSSL_*", "SSL_CERT_*",
}

// warmSeedNames are what the pinned SDK's imports read (its logging
// levels and format), so that the first server already starts with an
// attempt's values for them; servers report the rest, which later servers
// start with.
var warmSeedNames = []string{"LOG_LEVEL", "USER_LOG_LEVEL", "LOG_FORMAT", "DISABLE_RICH_LOGGING", "FLYTE_RESET_ROOT_LOGGER"}

const (
	warmBackoffMin = time.Second
	warmBackoffMax = time.Minute
	// warmStartTimeout bounds one handover (start → started); past it
	// the attempt starts plainly, and the child the server may still fork
	// for it is killed.
	warmStartTimeout = 30 * time.Second
)

// warmSpares is how many forked children wait, SDK imported, for an
// attempt (a variable for BenchmarkWarmStart).
var warmSpares = 1

// What a ready warm server pre-imported (its ready message's mode):
// warmModeSDK, the SDK itself (its background loops are started afresh
// in each child), or warmModeDependencies, only the SDK's third-party
// dependencies (each child imports the SDK: the server found a thread it
// could not defer, or the SDK is not shaped as it expects; it says why).
const (
	warmModeSDK          = "sdk"
	warmModeDependencies = "dependencies"
)

// WarmStats counts what the warm start did.
type WarmStats struct {
	// ServerStarts counts warm servers started; Restarts those started
	// after an earlier one died or refused.
	ServerStarts, Restarts int64
	// Preimports is what the last server that became ready pre-imported
	// (warmModeSDK or warmModeDependencies), "" before any did.
	Preimports string
}

// warmPool owns the runner's warm server: at most one, started lazily.
type warmPool struct {
	a0, python string
	log        *slog.Logger
	disabled   string // why warm start cannot work with this BinDir ("" if it can)

	mu      sync.Mutex
	srv     *warmServer
	learned []string // names servers reported, beyond the fixed ones
	notes   map[string]bool
	next    time.Time // no new server before
	backoff time.Duration
	// relearns counts servers replaced for variables they lacked (bounded:
	// a server that keeps reading new ones backs off like a failed one).
	relearns int

	starts, restarts atomic.Int64
	mode             atomic.Pointer[string] // the last ready server's pre-imports
}

func newWarmPool(binDir string, log *slog.Logger) *warmPool {
	w := &warmPool{a0: filepath.Join(binDir, "a0"), log: log, learned: slices.Clone(warmSeedNames), notes: map[string]bool{}}
	if binDir == "" {
		w.disabled = "no Python bin directory is configured"
		return w
	}
	w.python, w.disabled = a0Interpreter(w.a0)
	if w.disabled != "" {
		log.Warn("warm start disabled: attempts start a new interpreter each", "reason", w.disabled)
	}
	return w
}

// a0Interpreter reads the interpreter from a0's #! line, and checks that
// the script runs the SDK's runtime entry point (which the warm child runs).
func a0Interpreter(a0 string) (python, why string) {
	b, err := os.ReadFile(a0)
	if err != nil {
		return "", fmt.Sprintf("cannot read %s: %v", a0, err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	interp, ok := strings.CutPrefix(first, "#!")
	interp = strings.TrimSpace(interp)
	if !ok || !filepath.IsAbs(interp) || strings.ContainsAny(interp, " \t") {
		return "", fmt.Sprintf("%s does not start with #!<absolute path of python>", a0)
	}
	if !strings.Contains(string(b), "from flyte._bin.runtime import main") {
		return "", fmt.Sprintf("%s does not run flyte._bin.runtime's main", a0)
	}
	return interp, ""
}

func (w *warmPool) note(msg string, args ...any) {
	w.mu.Lock()
	seen := w.notes[msg]
	w.notes[msg] = true
	w.mu.Unlock()
	if !seen {
		w.log.Info(msg, args...)
	}
}

// serverFor returns the ready server that can run an attempt of a0 path
// with env, or nil and why not (then the attempt starts plainly). With no
// server it starts one, unless it is backing off.
func (w *warmPool) serverFor(path string, env []string) (*warmServer, string) {
	if w.disabled != "" {
		return nil, w.disabled
	}
	if path != w.a0 {
		return nil, "the command is not " + w.a0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	srv := w.srv
	if srv != nil && srv.isDead() {
		srv, w.srv = nil, nil
	}
	if srv == nil {
		if time.Now().Before(w.next) {
			return nil, "the warm server is backing off after a failure"
		}
		w.srv = w.startLocked(env)
		return nil, "the warm server is starting"
	}
	if !srv.isReady() {
		return nil, "the warm server is starting"
	}
	if name := srv.mismatch(env); name != "" {
		return nil, "its environment differs from the warm server's in " + name
	}
	return srv, ""
}

// keyEnv is the part of env that the server must share with its attempts.
func keyEnv(env []string, names []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if matchName(k, warmFixedNames) || slices.Contains(names, k) {
			out = append(out, kv)
		}
	}
	return out
}

func matchName(name string, patterns []string) bool {
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); ok && strings.HasPrefix(name, prefix) || name == p {
			return true
		}
	}
	return false
}

// startLocked starts a server whose environment is env's key part; it
// becomes ready in the background.
func (w *warmPool) startLocked(env []string) *warmServer {
	if w.starts.Add(1) > 1 {
		w.restarts.Add(1)
	}
	srv := &warmServer{pool: w, env: keyEnv(env, w.learned), trigger: env, ready: make(chan struct{}), dead: make(chan struct{}),
		spareNews: make(chan struct{}), exits: map[int]chan warmMsg{}}
	if err := srv.launch(); err != nil {
		w.failedLocked(fmt.Sprintf("cannot start the warm server: %v", err))
		srv.markDead()
	}
	return srv
}

// failedLocked backs off before the next server.
func (w *warmPool) failedLocked(why string) {
	w.backoff = min(max(2*w.backoff, warmBackoffMin), warmBackoffMax)
	w.next = time.Now().Add(w.backoff)
	w.log.Warn("warm start unavailable: attempts start plainly", "reason", why, "retryIn", w.backoff)
}

// serverEnded is called by a server's reader when it stops.
func (w *warmPool) serverEnded(srv *warmServer, why string, served, relearn bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.srv == srv {
		w.srv = nil
	}
	if relearn && w.relearns < 3 {
		w.relearns++
		w.log.Info("warm server restarts with more variables", "reason", why)
		return
	}
	if served {
		w.backoff = 0 // it worked for a while: the next one starts at once
		w.log.Warn("the warm server ended; a new one starts with the next attempt", "reason", why)
		return
	}
	w.failedLocked(why)
}

// learn records names a server reported and says whether the attempt
// that started srv set one of them that srv was not started with (then srv
// would turn that very attempt, and those like it, away).
func (w *warmPool) learn(srv *warmServer, names []string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := envMap(srv.env)
	trigger := envMap(srv.trigger)
	missing := false
	for _, n := range names {
		if matchName(n, warmFixedNames) {
			continue
		}
		if !slices.Contains(w.learned, n) {
			w.learned = append(w.learned, n)
		}
		if _, set := trigger[n]; set {
			if _, ok := had[n]; !ok {
				missing = true
			}
		}
	}
	return missing
}

func (w *warmPool) close() {
	w.mu.Lock()
	srv := w.srv
	w.srv = nil
	w.next = time.Now().Add(100 * 365 * 24 * time.Hour)
	w.mu.Unlock()
	if srv != nil {
		srv.shutdown()
	}
}

// Close ends the runner's warm server, if any (its idle children with it).
// Attempts it still runs die with it: call it once they ended.
func (r *Runner) Close() {
	if r.warm != nil {
		r.warm.close()
	}
}

// WarmStats says how many warm servers the runner started.
func (r *Runner) WarmStats() WarmStats {
	if r.warm == nil {
		return WarmStats{}
	}
	st := WarmStats{ServerStarts: r.warm.starts.Load(), Restarts: r.warm.restarts.Load()}
	if m := r.warm.mode.Load(); m != nil {
		st.Preimports = *m
	}
	return st
}
