// Package process runs one task attempt as a host process for the local
// executor: its own working directory, its own process group, stdout and
// stderr captured line by line into a per-attempt log file, a timeout and an
// abort that stop the whole process tree, and an Identity (pid + start time)
// that lets a restarted manager find and stop an attempt it lost track of
// (KillOrphan) without ever signalling a recycled pid.
//
// Containment: where the host allows it, every attempt runs in a cgroup of
// its own (cgroup_linux.go) that carries its resource limits and lets the
// attempt's end kill every process it started, however detached. Without
// one, the end of an attempt kills its process group, its process tree and
// whatever still works in its directory. Either way nothing an attempt
// started outlives it, and the manager, a child subreaper (reaper_linux.go),
// inherits and reaps what detached.
//
// Lifetime: the attempt's process gets Pdeathsig SIGKILL, so it dies with the
// manager. Pdeathsig fires when the OS *thread* that forked the child exits,
// not the process, and the Go runtime may retire threads at any time; so the
// goroutine that starts the process locks its OS thread and keeps it locked
// until it has reaped the process (it then exits still locked, which makes
// the runtime discard that thread rather than reuse it). Grandchildren that
// survive the manager are found by the recovery step through the process
// group (KillOrphan).
package process

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"fmgr.dev/executor/contract"
	"fmgr.dev/executor/local/netns"
	"fmgr.dev/executor/local/runas"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/errs"
)

// Defaults for Config's zero values.
const (
	DefaultKillGrace    = 10 * time.Second
	DefaultDrainTimeout = 2 * time.Second
	DefaultTailLines    = 50
)

// Config tunes a Runner.
type Config struct {
	// BinDir is the bin directory of the Python environment that provides
	// `a0`. It is put first on the task's PATH, so argv[0] = "a0" (and any
	// other bare name) resolves there first.
	BinDir string
	// KillGrace is how long a process has between SIGTERM and SIGKILL.
	KillGrace time.Duration
	// DrainTimeout bounds the wait for stdout/stderr to reach EOF once the
	// process exited (a daemon that escaped the group may hold them open).
	DrainTimeout time.Duration
	// TailLines is how many lines of each stream ExitStatus keeps.
	TailLines int
	// MaxLogBytes caps each attempt's log (see logfile.go); 0 means
	// config.DefaultMaxLogBytes.
	MaxLogBytes int64
	// CgroupRoot is where the cgroup hierarchies are mounted
	// (/sys/fs/cgroup when empty); "none" runs attempts without cgroups.
	CgroupRoot string
	// WarmStart forks a0 attempts from a pre-started interpreter that has
	// imported the SDK's dependencies (warm.go) instead of exec'ing a0.
	WarmStart bool
	// Logger receives what the warm start has to say (nil: discarded).
	Logger *slog.Logger
	// Confine lists what attempts of another user (Spec.User) must reach
	// besides the Python environment (the work and blob directories); see
	// confine_linux.go.
	Confine []string
}

// Runner starts attempt processes.
type Runner struct {
	cfg Config
	// confine is the mount namespace of attempts of another user.
	confine confinePlan
	cg      *cgroupHost
	warm    *warmPool // nil without WarmStart
}

// NewRunner returns a Runner; zero Config fields take their defaults.
func NewRunner(cfg Config) *Runner {
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = DefaultKillGrace
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = DefaultDrainTimeout
	}
	if cfg.TailLines <= 0 {
		cfg.TailLines = DefaultTailLines
	}
	if cfg.MaxLogBytes <= 0 {
		cfg.MaxLogBytes = config.DefaultMaxLogBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Runner{cfg: cfg, confine: planConfinement(append(PythonPaths(cfg.BinDir), cfg.Confine...))}
	if cfg.WarmStart {
		r.warm = newWarmPool(cfg.BinDir, cfg.Logger)
	}
	switch cfg.CgroupRoot {
	case "none":
		r.cg = &cgroupHost{why: "disabled for this runner"}
	case "":
		r.cg = probeCgroups(cgroupRoot)
	default:
		r.cg = probeCgroups(cfg.CgroupRoot)
	}
	return r
}

// Confinement says which directories attempts of another user find
// empty, and what of them is bound back ("" when none is hidden).
func (r *Runner) Confinement() string {
	if r.confine.empty() {
		return ""
	}
	return fmt.Sprintf("hidden (tmpfs): %s; bound back: %s", strings.Join(r.confine.Hide, ", "), strings.Join(r.confine.Bind, ", "))
}

// Containment says in a sentence how attempts are contained on this host
// and whether their resource limits are enforced (logged once at start).
func (r *Runner) Containment() string { return r.cg.Describe() }

// Cgroups reports whether attempts run in cgroups of their own.
func (r *Runner) Cgroups() bool { return r.cg.ok() }

// Spec is one attempt to run.
type Spec struct {
	// Args is the rendered argv; Args[0] is resolved on the task's PATH
	// (BinDir first) unless it contains a slash.
	Args []string
	// BinDir, when set, replaces Config.BinDir for this process: the bin
	// directory of the image environment the task runs in. Its a0 is not
	// the warm server's, so such a process always starts plainly.
	BinDir string
	// Env is the complete environment (contract.Env.Environ()).
	Env []string
	// Dir is the attempt's working directory, an absolute path that must not
	// exist yet or be empty; it is created. The runtime extracts the code
	// bundle into it.
	Dir string
	// LogPath is the attempt's log file (see the format in logfile.go);
	// appended to if it exists.
	LogPath string
	// Timeout stops the process group when it fires; 0 means none.
	Timeout time.Duration
	// Limits are the task's resources, enforced through the attempt's
	// cgroup when the host gives one (else the log says they are not).
	Limits Limits
	// Plain starts the process by exec even with warm start on (raw
	// containers: their command is not the SDK's runtime).
	Plain bool
	// User is who the process runs as (runas.go); the zero User is the
	// manager's own.
	User runas.User
	// NetNS, when set, is the network namespace the process starts in
	// (package netns; the caller holds and closes it). Such a process
	// always starts plainly.
	NetNS *netns.NS
	// UserNS, when set, starts the process as root of a user namespace of
	// its own (with mount and pid namespaces of its own) whose ids are the
	// host's UserNS.First.. (an image build: its package scripts are root
	// in the image, never on the host). User must be the zero User.
	UserNS *IDRange
}

// IDRange is Count uids and gids of the host from First, the ids 0.. of a
// user namespace. Group, when not 0, is a group of the host the process is
// in besides (gid Count in the namespace): the attempts' group, which the
// work directory belongs to.
type IDRange struct{ First, Count, Group uint32 }

// ExitStatus is how the process ended.
type ExitStatus struct {
	// Code is the exit code, -1 when a signal killed the process.
	Code int
	// Signal names the signal that killed the process ("killed",
	// "terminated", ...), "" if it exited.
	Signal string
	// TimedOut and Aborted say the runner stopped the process, and why.
	TimedOut    bool
	Aborted     bool
	AbortReason string
	Started     time.Time
	Ended       time.Time
	// StdoutTail and StderrTail hold the last lines of each stream.
	StdoutTail []string
	StderrTail []string
	// OOMKilled says the kernel killed a process of the attempt for going
	// over MemoryLimit, and the attempt did not succeed.
	OOMKilled   bool
	MemoryLimit int64
	// Err is set when waiting for the process failed in an unexpected way.
	Err error
}

// Contract is the exit in the terms contract.Classify takes.
func (s ExitStatus) Contract() contract.Exit {
	return contract.Exit{Code: s.Code, Signal: s.Signal, TimedOut: s.TimedOut, Aborted: s.Aborted, StdoutTail: s.StdoutTail, StderrTail: s.StderrTail}
}

// Process is a running (or finished) attempt.
type Process struct {
	cfg     Config
	id      Identity
	logPath string
	log     *logWriter
	outTail *tail
	errTail *tail
	pipes   []*os.File
	pumps   sync.WaitGroup
	exited  chan struct{} // the leader exited; not reaped yet
	reap    chan struct{} // closed by supervise: reap the leader now
	waitCh  chan leaderExit
	abortCh chan string
	pauseCh chan bool     // Pause (true) and Resume (false), handled by supervise
	watched chan struct{} // closed when supervise stops watching the process
	done    chan struct{}
	status  ExitStatus
	dir     string
	cg      *cgroup
	limits  Limits
	// Unenforced says why the declared limits are not enforced ("" when
	// they are, or none were declared).
	unenforced string
	warm       bool // forked by the warm server
	user       runas.User
	// contained says that the attempt's end found everything it started
	// in its cgroup and killed it there (see killLeftovers): nothing of
	// it can be left anywhere else. Set by supervise before done closes.
	contained bool
}

// leaderExit is how the attempt's leader ended, from os/exec or from the
// warm server's report.
type leaderExit struct {
	code   int            // the exit code when signal is 0
	signal syscall.Signal // the signal that killed it, 0 if it exited
	err    error          // waiting failed
}

func execExit(err error) leaderExit {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return leaderExit{}
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return leaderExit{signal: ws.Signal()}
		}
		return leaderExit{code: ee.ExitCode()}
	}
	return leaderExit{err: err}
}

// Start launches spec. It returns once the process runs (or failed to
// start: then nothing keeps running and the log says why).
func (r *Runner) Start(spec Spec) (*Process, error) {
	if len(spec.Args) == 0 || spec.Args[0] == "" {
		return nil, errs.Invalidf("process: empty argv")
	}
	if !filepath.IsAbs(spec.Dir) || filepath.Clean(spec.Dir) == "/" {
		return nil, errs.Invalidf("process: working directory %q must be an absolute path below /", spec.Dir)
	}
	if spec.LogPath == "" {
		return nil, errs.Invalidf("process: no log path")
	}
	if err := freshDir(spec.Dir); err != nil {
		return nil, err
	}
	if err := giveDir(spec.Dir, spec.User); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(spec.LogPath), 0o755); err != nil {
		return nil, fmt.Errorf("process: log directory: %w", err)
	}
	lf, err := os.OpenFile(spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600) // the manager's alone
	if err != nil {
		return nil, fmt.Errorf("process: open log: %w", err)
	}
	p := &Process{
		cfg:     r.cfg,
		logPath: spec.LogPath,
		log:     newLogWriter(lf, r.cfg.MaxLogBytes),
		outTail: &tail{n: r.cfg.TailLines},
		errTail: &tail{n: r.cfg.TailLines},
		exited:  make(chan struct{}),
		reap:    make(chan struct{}),
		waitCh:  make(chan leaderExit, 1),
		abortCh: make(chan string, 1),
		pauseCh: make(chan bool),
		watched: make(chan struct{}),
		done:    make(chan struct{}),
		dir:     spec.Dir,
		limits:  spec.Limits,
		user:    spec.User,
	}
	p.setUpCgroup(r.cg, spec)
	binDir := r.cfg.BinDir
	if spec.BinDir != "" {
		binDir = spec.BinDir
	}
	env := withBinDir(spec.Env, binDir)
	path, err := lookPath(spec.Args[0], env)
	if err != nil {
		p.log.system("cannot start: %v", err)
		p.releaseCgroup()
		p.log.close()
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		p.releaseCgroup()
		p.log.close()
		return nil, fmt.Errorf("process: pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		p.releaseCgroup()
		p.log.close()
		return nil, fmt.Errorf("process: pipe: %w", err)
	}
	p.pipes = []*os.File{outR, errR}
	if r.warm != nil && !spec.Plain && spec.NetNS == nil && spec.UserNS == nil && (spec.BinDir == "" || spec.BinDir == r.cfg.BinDir) {
		if id, ok := p.startWarm(r.warm, path, spec, r.confine, env, outW, errW); ok {
			outW.Close()
			errW.Close()
			p.warm = true
			p.id = id
			p.begin(outR, errR, "warm-started %s as pid %d in %s", path, spec)
			return p, nil
		}
	}
	attr := &syscall.SysProcAttr{
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}
	if p.cg != nil && p.cg.v2 {
		attr.UseCgroupFD, attr.CgroupFD = true, p.cg.fd
	}
	setCredential(attr, spec.User)
	if ns := spec.UserNS; ns != nil {
		if spec.User.Other() {
			return nil, errors.New("process: a user namespace's process starts as the manager's user")
		}
		attr.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(ns.First), Size: int(ns.Count)}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(ns.First), Size: int(ns.Count)}}
		attr.GidMappingsEnableSetgroups = true
		attr.Credential = &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}}
		if ns.Group != 0 {
			attr.GidMappings = append(attr.GidMappings, syscall.SysProcIDMap{ContainerID: int(ns.Count), HostID: int(ns.Group), Size: 1})
			attr.Credential.Groups = []uint32{ns.Count}
		}
	}
	cmd := &exec.Cmd{
		Path:        path,
		Args:        spec.Args,
		Env:         env,
		Dir:         spec.Dir,
		Stdout:      outW,
		Stderr:      errW,
		SysProcAttr: attr,
	}
	type started struct {
		id  Identity
		err error
	}
	startCh := make(chan started, 1)
	go func() {
		// Locked for the life of the child and never unlocked: see the
		// package comment on Pdeathsig.
		runtime.LockOSThread()
		// Held from before the fork until the leader is tracked: see
		// reaper_linux.go.
		reaper.mu.RLock()
		err := noNewPrivsThread(spec.User)
		if err == nil && (spec.User.Other() || spec.UserNS != nil) {
			// A user namespace's root is no one on the host either.
			err = enterConfinement(r.confine)
		}
		if err == nil && spec.NetNS != nil {
			err = spec.NetNS.Join()
		}
		if err == nil {
			err = p.cg.enterThread()
		}
		if err == nil {
			err = cmd.Start()
			p.cg.leaveThread()
		}
		if err != nil {
			reaper.mu.RUnlock()
			startCh <- started{err: err}
			return
		}
		// The child cannot be reaped before Wait below, so its stat is
		// readable here even if it already exited.
		pid := cmd.Process.Pid
		id, err := ReadIdentity(pid)
		if err != nil {
			id = Identity{PID: pid, PGID: pid, BootID: bootID}
		}
		trackLocked(pid, pid) // Setpgid: the leader's group is its pid
		reaper.mu.RUnlock()
		startCh <- started{id: id}
		// Learn of the exit without reaping: the leader's zombie keeps
		// its pid, and so its group's number, from reuse until supervise
		// has dealt with the leftovers (see reaper_linux.go).
		_ = waitExitedNoReap(pid)
		close(p.exited)
		<-p.reap
		p.waitCh <- execExit(cmd.Wait())
	}()
	st := <-startCh
	outW.Close()
	errW.Close()
	if st.err != nil {
		outR.Close()
		errR.Close()
		p.log.system("cannot start %s: %v", path, st.err)
		p.releaseCgroup()
		p.log.close()
		return nil, fmt.Errorf("process: start %s: %w", path, st.err)
	}
	p.id = st.id
	p.begin(outR, errR, "started %s as pid %d in %s", path, spec)
	return p, nil
}

// begin logs the start and runs the log pumps and the supervisor.
func (p *Process) begin(outR, errR *os.File, format, path string, spec Spec) {
	p.status.Started = time.Now()
	p.log.system(format, path, p.id.PID, spec.Dir)
	p.pumps.Add(2)
	go func() { defer p.pumps.Done(); pump(outR, Stdout, p.log, p.outTail) }()
	go func() { defer p.pumps.Done(); pump(errR, Stderr, p.log, p.errTail) }()
	go p.supervise(spec.Timeout)
}

// Warm reports whether the warm server forked the process (see warm.go).
func (p *Process) Warm() bool { return p.warm }

// Identity is the process group's identity, for KillOrphan after a restart.
func (p *Process) Identity() Identity { return p.id }

// LogPath is the attempt log.
func (p *Process) LogPath() string { return p.logPath }

// Done is closed once the process exited and its log is complete.
func (p *Process) Done() <-chan struct{} { return p.done }

// Finished reports whether Done is closed (a FollowLog done function).
func (p *Process) Finished() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Contained reports, once Done is closed, whether everything the attempt
// started was in its cgroup, which it could not leave, and was killed
// there (see killLeftovers): no process of it runs anywhere any more.
func (p *Process) Contained() bool {
	select {
	case <-p.done:
		return p.contained
	default:
		return false
	}
}

// Wait blocks until the process exited and returns how.
func (p *Process) Wait() ExitStatus {
	<-p.done
	return p.status
}

// freshDir creates dir, which must not exist or be empty.
func freshDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("process: working directory: %w", err)
	case len(entries) > 0:
		return fmt.Errorf("process: working directory %s is not empty: %w", dir, errs.ErrAlreadyExists)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("process: working directory: %w", err)
	}
	return nil
}

// withBinDir returns env with binDir first on PATH.
func withBinDir(env []string, binDir string) []string {
	out := append([]string(nil), env...)
	if binDir == "" {
		return out
	}
	for i, kv := range out {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			if v == "" {
				out[i] = "PATH=" + binDir
			} else if first, _, _ := strings.Cut(v, ":"); first != binDir {
				out[i] = "PATH=" + binDir + ":" + v
			}
			return out
		}
	}
	return append(out, "PATH="+binDir)
}

// lookPath resolves a bare command name on the task's PATH (not the
// manager's); names with a slash are used as given.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	var path string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		cand := filepath.Join(dir, name)
		if fi, err := os.Stat(cand); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return cand, nil
		}
	}
	return "", fmt.Errorf("process: %q not found on the task's PATH %q: %w", name, path, exec.ErrNotFound)
}
