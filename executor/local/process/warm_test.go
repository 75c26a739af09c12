package process

import (
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"fmgr.dev/executor/local/runas"
	"fmgr.dev/internal/testkit"
)

// The warm-start tests run the real SDK's a0 (FM_TEST_VENV). To look at the
// process a warm child becomes without a whole task, most use a0's own
// _F_EXEC_WRAPPER hook: once a0 has parsed its arguments, its entry
// function execs the wrapper (here a shell script) in place, in the
// attempt's process: same pid, group, environment, directory, descriptors
// and cgroup. TestRealSDKRuntime/warm runs real tasks.

// warmArgs are arguments a0 accepts (the wrapper runs before they are used).
var warmArgs = []string{"a0", "--inputs", "in", "--outputs-path", "out", "--version", "v1"}

// warmEnv is an attempt's environment in these tests, extra last.
func warmEnv(extra ...string) []string {
	return append([]string{"PATH=/usr/bin:/bin", "LANG=C", "PYTHONUNBUFFERED=1", "_U_RUN_BASE=/tmp/rb"}, extra...)
}

// wrapper makes a0 exec `sh -c script` in its place.
func wrapper(script string) string { return "_F_EXEC_WRAPPER=sh -c '" + script + "' wrapper" }

// newWarmRunner returns a warm-starting runner over the venv and its log.
func newWarmRunner(t *testing.T, venv string, cgroupRoot string) (*Runner, *testkit.Buffer) {
	t.Helper()
	lb := &testkit.Buffer{}
	r := NewRunner(Config{BinDir: filepath.Join(venv, "bin"), KillGrace: time.Minute, DrainTimeout: time.Minute,
		WarmStart: true, CgroupRoot: cgroupRoot, Logger: slog.New(slog.NewTextHandler(lb, nil))})
	t.Cleanup(r.Close)
	return r, lb
}

// warmRunner returns a runner whose warm server is ready for warmEnv.
func warmRunner(t *testing.T, venv string) *Runner {
	t.Helper()
	r, _ := newWarmRunner(t, venv, "none")
	waitWarm(t, r, warmEnv())
	return r
}

// waitWarm waits until the runner would warm-start an attempt with env.
func waitWarm(t testing.TB, r *Runner, env []string) {
	t.Helper()
	a0 := filepath.Join(r.cfg.BinDir, "a0")
	testkit.Eventually(t, "the warm server to be ready", 3*time.Minute, func() bool {
		srv, _ := r.warm.serverFor(a0, withBinDir(env, r.cfg.BinDir))
		return srv != nil
	})
}

// currentServer is the runner's warm server now (nil if none).
func currentServer(r *Runner) *warmServer {
	r.warm.mu.Lock()
	defer r.warm.mu.Unlock()
	return r.warm.srv
}

func warmSpec(a attempt, venv string, script string, extra ...string) Spec {
	return Spec{Args: warmArgs, Env: warmEnv(append([]string{wrapper(script)}, extra...)...), Dir: a.dir, LogPath: a.log}
}

// A warm-started attempt is the attempt's process as an exec'd one is: its
// log, exit code, complete environment (nothing of the server's), working
// directory, own process group and identity.
func TestWarmStartedAttempt(t *testing.T) {
	venv := sdkVenv(t)
	r := warmRunner(t, venv)
	a := newAttempt(t)
	base := filepath.Dir(a.dir)
	script := `echo to-stdout; echo to-stderr >&2; pwd > ../cwd; env > ../env; echo $$ > ../pid; cut -d" " -f5 /proc/$$/stat > ../pgid; exit 3`
	spec := warmSpec(a, venv, script, "SECRET_TOKEN=s3cr3t", "TASK_VAR=x y")
	p := start(t, r, spec)
	st := p.Wait()
	if !p.Warm() {
		t.Fatalf("not warm-started:\n%s", logText(t, a.log))
	}
	if st.Code != 3 || st.Signal != "" || st.Err != nil {
		t.Errorf("status %+v, want exit code 3", st)
	}
	lines, err := ReadLog(a.log)
	if err != nil {
		t.Fatal(err)
	}
	if !containsMsg(lines, Stdout, "to-stdout") || !containsMsg(lines, Stderr, "to-stderr") {
		t.Errorf("stdout/stderr not in the log:\n%s", logText(t, a.log))
	}
	if !slices.Contains(st.StdoutTail, "to-stdout") || !slices.Contains(st.StderrTail, "to-stderr") {
		t.Errorf("tails %q %q", st.StdoutTail, st.StderrTail)
	}
	if cwd := readTrim(t, filepath.Join(base, "cwd")); cwd != a.dir {
		t.Errorf("working directory %q, want %q", cwd, a.dir)
	}
	pid, _ := strconv.Atoi(readTrim(t, filepath.Join(base, "pid")))
	if pid != p.Identity().PID || p.Identity().PGID != pid || readTrim(t, filepath.Join(base, "pgid")) != strconv.Itoa(pid) {
		t.Errorf("pid %d, pgid %s, identity %+v: the attempt must lead its own group", pid, readTrim(t, filepath.Join(base, "pgid")), p.Identity())
	}
	if p.Identity().StartTicks == 0 {
		t.Errorf("identity %+v has no start time", p.Identity())
	}
	got := map[string]string{}
	for _, kv := range strings.Split(readTrim(t, filepath.Join(base, "env")), "\n") {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	want := envMap(withBinDir(spec.Env, r.cfg.BinDir))
	for k, v := range want {
		if got[k] != v {
			t.Errorf("env %s = %q, want %q", k, got[k], v)
		}
	}
	// Only what the shell and a0's wrapper hook add themselves.
	for k := range got {
		if _, ok := want[k]; !ok && !slices.Contains([]string{"PWD", "SHLVL", "_", "_F_EXEC_WRAPPED", "OLDPWD"}, k) {
			t.Errorf("env has %s, which the attempt was not given", k)
		}
	}
}

// a0 itself (no wrapper) in a warm child: its usage error exit code and
// message, as from an exec'd a0.
func TestWarmStartedA0UsageError(t *testing.T) {
	venv := sdkVenv(t)
	r := warmRunner(t, venv)
	a := newAttempt(t)
	p := start(t, r, Spec{Args: []string{"a0", "--version", "v1"}, Env: warmEnv(), Dir: a.dir, LogPath: a.log})
	st := p.Wait()
	if !p.Warm() {
		t.Fatalf("not warm-started:\n%s", logText(t, a.log))
	}
	if st.Code != 2 || !strings.Contains(strings.Join(st.StderrTail, "\n"), "Missing option") {
		t.Errorf("status %+v, want click's usage error (exit 2)", st)
	}
}

// Abort and timeout stop a warm-started attempt's whole group, as an exec'd
// one's.
func TestWarmStartedAbortAndTimeout(t *testing.T) {
	venv := sdkVenv(t)
	r := warmRunner(t, venv)
	for _, how := range []string{"abort", "timeout"} {
		t.Run(how, func(t *testing.T) {
			a := newAttempt(t)
			spec := warmSpec(a, venv, `sleep 300 & echo $! > ../child; wait`)
			if how == "timeout" {
				spec.Timeout = time.Second
			}
			p := start(t, r, spec)
			if !p.Warm() {
				t.Fatalf("not warm-started:\n%s", logText(t, a.log))
			}
			child := readPid(t, filepath.Join(filepath.Dir(a.dir), "child"))
			if how == "abort" {
				p.Abort("test abort")
			}
			st := p.Wait()
			if how == "abort" && (!st.Aborted || st.Signal != "terminated") {
				t.Errorf("status %+v, want aborted by SIGTERM", st)
			}
			if how == "timeout" && (!st.TimedOut || st.Signal != "terminated") {
				t.Errorf("status %+v, want timed out, SIGTERM", st)
			}
			if alive(child) {
				t.Errorf("the attempt's child %d survived", child)
			}
		})
	}
}

// After a "restart" (a new Runner, as a restarted manager has), the
// recorded identity of a warm-started attempt finds and stops its group.
func TestWarmStartedKillOrphan(t *testing.T) {
	venv := sdkVenv(t)
	r := warmRunner(t, venv)
	a := newAttempt(t)
	p := start(t, r, warmSpec(a, venv, `sleep 300 & echo $! > ../child; wait`))
	if !p.Warm() {
		t.Fatalf("not warm-started:\n%s", logText(t, a.log))
	}
	child := readPid(t, filepath.Join(filepath.Dir(a.dir), "child"))
	id := p.Identity()
	_ = NewRunner(Config{}) // the restarted manager's runner: KillOrphan needs nothing of the old one
	killed, err := KillOrphan(id, patience)
	if !killed || err != nil {
		t.Fatalf("KillOrphan = %v, %v", killed, err)
	}
	if GroupAlive(id) || alive(child) {
		t.Error("the group survived KillOrphan")
	}
	if st := p.Wait(); st.Signal != "terminated" {
		t.Errorf("status %+v, want killed by SIGTERM", st)
	}
}

// A warm server that dies between attempts is replaced: the next attempt
// starts plainly while a new one starts, later ones are warm again.
func TestWarmServerReplaced(t *testing.T) {
	venv := sdkVenv(t)
	r := warmRunner(t, venv)
	old := currentServer(r)
	if err := old.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-old.dead
	a := newAttempt(t)
	p := start(t, r, warmSpec(a, venv, `exit 0`))
	if st := p.Wait(); st.Code != 0 {
		t.Fatalf("status %+v", st)
	}
	waitWarm(t, r, warmEnv())
	if currentServer(r) == old || currentServer(r).cmd.Process.Pid == old.cmd.Process.Pid {
		t.Fatal("the dead server was not replaced")
	}
	a = newAttempt(t)
	p = start(t, r, warmSpec(a, venv, `exit 4`))
	if st := p.Wait(); !p.Warm() || st.Code != 4 {
		t.Errorf("warm %v, status %+v, want a warm start exiting 4", p.Warm(), st)
	}
	if s := r.WarmStats(); s.ServerStarts != 2 || s.Restarts != 1 {
		t.Errorf("stats %+v, want 2 starts, 1 restart", s)
	}
}

// A warm server that dies while it runs an attempt takes the attempt with
// it (Pdeathsig), and the runner still reaps and reports it.
func TestWarmServerDiesDuringAnAttempt(t *testing.T) {
	if err := EnableSubreaper(); err != nil {
		t.Fatalf("subreaper: %v", err)
	}
	venv := sdkVenv(t)
	r := warmRunner(t, venv)
	a := newAttempt(t)
	p := start(t, r, warmSpec(a, venv, `echo $$ > ../pid; exec sleep 300`))
	if !p.Warm() {
		t.Fatalf("not warm-started:\n%s", logText(t, a.log))
	}
	readPid(t, filepath.Join(filepath.Dir(a.dir), "pid"))
	if err := currentServer(r).cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	st := p.Wait()
	if st.Signal != "killed" {
		t.Errorf("status %+v, want killed", st)
	}
	testkit.Eventually(t, "the attempt's zombie to be reaped", patience, func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(p.Identity().PID))
		return os.IsNotExist(err)
	})
}

// Attempts the warm server cannot serve faithfully start plainly.
func TestWarmStartBypassed(t *testing.T) {
	venv := sdkVenv(t)
	r := warmRunner(t, venv)
	cases := []struct {
		name string
		spec func(a attempt) Spec
		warm bool
	}{
		{"the task's own variables", func(a attempt) Spec { return warmSpec(a, venv, `exit 0`, "FOO=bar", "FLYTE_X=1") }, true},
		{"another command", func(a attempt) Spec {
			return Spec{Args: []string{"sh", "-c", "exit 0"}, Env: warmEnv(), Dir: a.dir, LogPath: a.log}
		}, false},
		{"another environment's a0", func(a attempt) Spec {
			other := filepath.Join(t.TempDir(), "a0")
			if err := os.Symlink(filepath.Join(venv, "bin", "a0"), other); err != nil {
				t.Fatal(err)
			}
			s := warmSpec(a, venv, `exit 0`)
			s.Args = append([]string{other}, warmArgs[1:]...)
			return s
		}, false},
		{"a raw container", func(a attempt) Spec { s := warmSpec(a, venv, `exit 0`); s.Plain = true; return s }, false},
		{"PYTHONPATH", func(a attempt) Spec { return warmSpec(a, venv, `exit 0`, "PYTHONPATH=/nowhere") }, false},
		{"LD_PRELOAD", func(a attempt) Spec { return warmSpec(a, venv, `exit 0`, "LD_PRELOAD=") }, false},
		{"another locale", func(a attempt) Spec {
			s := warmSpec(a, venv, `exit 0`)
			s.Env = append(slices.DeleteFunc(s.Env, func(kv string) bool { return strings.HasPrefix(kv, "LANG=") }), "LANG=C.UTF-8")
			return s
		}, false},
		// Read by the SDK's logging at import.
		{"another LOG_LEVEL", func(a attempt) Spec { return warmSpec(a, venv, `exit 0`, "LOG_LEVEL=10") }, false},
		// fsspec reads its configuration from FSSPEC_* at import.
		{"an fsspec setting", func(a attempt) Spec { return warmSpec(a, venv, `exit 0`, `FSSPEC_FILE={"auto_mkdir": true}`) }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newAttempt(t)
			p := start(t, r, tc.spec(a))
			st := p.Wait()
			if p.Warm() != tc.warm {
				t.Errorf("warm-started = %v, want %v:\n%s", p.Warm(), tc.warm, logText(t, a.log))
			}
			if st.Code != 0 {
				t.Errorf("status %+v", st)
			}
			if !tc.warm && !tc.spec(a).Plain && !containsMsg(mustReadLog(t, a.log), System, "not warm-started: ") {
				t.Errorf("the log does not say why it was not warm-started:\n%s", logText(t, a.log))
			}
		})
	}
	// Without WarmStart nothing is warm-started.
	plain := NewRunner(Config{BinDir: filepath.Join(venv, "bin")})
	a := newAttempt(t)
	p := start(t, plain, warmSpec(a, venv, `exit 0`))
	if p.Wait(); p.Warm() || plain.WarmStats().ServerStarts != 0 {
		t.Error("a runner without WarmStart warm-started")
	}
}

// standInSDK writes a stand-in `flyte` package whose a0 entry point
// (flyte._bin.runtime.main) is runtime, plus extra modules, and returns the
// directory to put on PYTHONPATH.
func standInSDK(t *testing.T, runtime string, extra map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{"flyte/__init__.py": "", "flyte/_bin/__init__.py": "", "flyte/_bin/runtime.py": runtime}
	maps.Copy(files, extra)
	for path, body := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, path), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A server whose imports start a thread refuses to serve (fork would copy
// only one thread): attempts start plainly, and the runner says why.
func TestWarmServerRefusesWhenImportsStartThreads(t *testing.T) {
	venv := sdkVenv(t)
	// A stand-in SDK on PYTHONPATH (so the server is started with it):
	// its runtime imports a module that starts a thread.
	fake := standInSDK(t, "import threadstarter\ndef main():\n    print('fake runtime ran')\n    return 0\n",
		map[string]string{"threadstarter.py": "import threading, time\nthreading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n"})
	r, lb := newWarmRunner(t, venv, "none")
	env := warmEnv("PYTHONPATH=" + fake)
	a := newAttempt(t)
	p := start(t, r, Spec{Args: warmArgs, Env: env, Dir: a.dir, LogPath: a.log})
	testkit.Eventually(t, "the server to refuse", 3*time.Minute, func() bool {
		return strings.Contains(lb.String(), "started 1 threads")
	})
	if st := p.Wait(); p.Warm() || st.Code != 0 || !slices.Contains(st.StdoutTail, "fake runtime ran") {
		t.Errorf("warm %v, status %+v, want a plain start of the fake runtime", p.Warm(), st)
	}
	a = newAttempt(t)
	p = start(t, r, Spec{Args: warmArgs, Env: env, Dir: a.dir, LogPath: a.log})
	if p.Wait(); p.Warm() {
		t.Error("warm-started by a server that refused")
	}
	if !strings.Contains(lb.String(), "warm start unavailable") {
		t.Errorf("the runner's log does not say warm start is unavailable:\n%s", lb.String())
	}
}

// With cgroups, a warm-started attempt runs in its own cgroup (moved there
// before the go) and its memory limit applies.
func TestWarmStartedAttemptJoinsItsCgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating cgroups needs root")
	}
	venv := sdkVenv(t)
	r, _ := newWarmRunner(t, venv, "")
	if !r.cg.ok() {
		t.Skipf("no cgroups here: %s", r.Containment())
	}
	waitWarm(t, r, warmEnv())
	a := newAttempt(t)
	p := start(t, r, warmSpec(a, venv, `cat /proc/self/cgroup > ../cgroup`))
	if st := p.Wait(); !p.Warm() || st.Code != 0 {
		t.Fatalf("warm %v, status %+v", p.Warm(), st)
	}
	if cg := readTrim(t, filepath.Join(filepath.Dir(a.dir), "cgroup")); !strings.Contains(cg, cgroupName(a.dir)) {
		t.Errorf("the attempt ran outside its cgroup %s:\n%s", cgroupName(a.dir), cg)
	}
	assertCgroupRemoved(t, r, a.dir)
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func mustReadLog(t *testing.T, path string) []Line {
	t.Helper()
	lines, err := ReadLog(path)
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

func logText(t *testing.T, path string) string {
	var b strings.Builder
	for _, l := range mustReadLog(t, path) {
		b.WriteString(l.Stream.String() + " " + l.Message + "\n")
	}
	return b.String()
}

// BenchmarkWarmStart times one attempt of a0 (to where a task's code would
// start: the wrapper exits at once), plain and warm with and without a
// spare child waiting.
//
//	FM_TEST_VENV=... go test ./executor/local/process -run '^$' -bench WarmStart -benchtime 20x
func BenchmarkWarmStart(b *testing.B) {
	venv := sdktestVenvB(b)
	for _, mode := range []struct {
		name   string
		warm   bool
		spares int
	}{{"plain", false, 0}, {"warm-no-spare", true, 0}, {"warm-1-spare", true, 1}} {
		b.Run(mode.name, func(b *testing.B) {
			old := warmSpares
			warmSpares = mode.spares
			defer func() { warmSpares = old }()
			r := NewRunner(Config{BinDir: filepath.Join(venv, "bin"), WarmStart: mode.warm, CgroupRoot: "none"})
			defer r.Close()
			if mode.warm {
				waitWarm(b, r, warmEnv())
			}
			base := b.TempDir()
			b.ResetTimer()
			for i := range b.N {
				a := attempt{dir: filepath.Join(base, strconv.Itoa(i), "work"), log: filepath.Join(base, strconv.Itoa(i), "a.log")}
				p, err := r.Start(warmSpec(a, venv, `exit 0`))
				if err != nil {
					b.Fatal(err)
				}
				if st := p.Wait(); st.Code != 0 || p.Warm() != mode.warm {
					b.Fatalf("status %+v, warm %v", st, p.Warm())
				}
			}
		})
	}
}

func sdktestVenvB(b *testing.B) string {
	v := os.Getenv("FM_TEST_VENV")
	if v == "" {
		b.Skip("FM_TEST_VENV is not set")
	}
	return v
}

// What ps and other tools read of a warm child (/proc/<pid>/environ and
// cmdline) is the attempt's environment and a0's command line, as for an
// exec'd a0, not the server's.
func TestWarmChildShowsTheAttemptsEnvironAndCmdline(t *testing.T) {
	venv := sdkVenv(t)
	r := warmRunner(t, venv)
	a := newAttempt(t)
	if err := os.MkdirAll(a.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	env := withBinDir(warmEnv("FM_MARK=shown"), r.cfg.BinDir)
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	srv := currentServer(r)
	sp, exit, err := srv.handover(warmArgs, env, a.dir, runas.User{}, nil, outW, outW)
	outW.Close()
	if err != nil {
		t.Fatal(err)
	}
	pid := sp.pid
	// Held before its go: it never runs a0; killed below.
	defer func() {
		sp.close()
		_ = syscall.Kill(pid, syscall.SIGKILL)
		srv.collect(pid, exit, nil, nil)
	}()
	environ, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Split(strings.TrimSuffix(string(environ), "\x00"), "\x00"); !slices.Equal(got, env) {
		t.Errorf("/proc/%d/environ = %q, want %q", pid, got, env)
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	want := append([]string{r.warm.python, r.warm.a0}, warmArgs[1:]...)
	if got := strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00"); !slices.Equal(got, want) {
		t.Errorf("/proc/%d/cmdline = %q, want %q", pid, got, want)
	}
}

// A warm child ends as the interpreter's exit would end an exec'd a0,
// without tearing the inherited heap down: it waits for the task's
// non-daemon threads, runs its atexit functions, flushes the files it left
// open, and exits with a0's code.
func TestWarmChildExitsAsTheInterpreterWould(t *testing.T) {
	venv := sdkVenv(t)
	runtime := `import atexit, os, sys, threading, time
def main():
    out = os.environ["OUT"]
    global kept
    kept = open(os.path.join(out, "buffered"), "w")  # never closed or flushed
    kept.write("left open")
    atexit.register(lambda: open(os.path.join(out, "atexit"), "w").write("ran"))
    def late():
        time.sleep(0.5)
        open(os.path.join(out, "thread"), "w").write("done")
    threading.Thread(target=late).start()
    return 5
`
	fake := standInSDK(t, runtime, nil)
	r, _ := newWarmRunner(t, venv, "none")
	out := t.TempDir()
	env := warmEnv("PYTHONPATH="+fake, "OUT="+out)
	waitWarm(t, r, env)
	a := newAttempt(t)
	p := start(t, r, Spec{Args: warmArgs, Env: env, Dir: a.dir, LogPath: a.log})
	st := p.Wait()
	if !p.Warm() {
		t.Fatalf("not warm-started:\n%s", logText(t, a.log))
	}
	if st.Code != 5 || st.Signal != "" {
		t.Errorf("status %+v, want a0's exit code 5", st)
	}
	for file, want := range map[string]string{"buffered": "left open", "atexit": "ran", "thread": "done"} {
		if got, err := os.ReadFile(filepath.Join(out, file)); err != nil || string(got) != want {
			t.Errorf("%s: %q %v, want %q", file, got, err, want)
		}
	}
}
