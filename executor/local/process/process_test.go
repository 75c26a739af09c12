package process

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"fmgr.dev/executor/contract"
	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/testkit"
	"google.golang.org/protobuf/proto"
)

var testEnv = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C"}

// testRunner waits generously before escalating to SIGKILL and before
// giving up on output: on a loaded machine a shell may take a while to die
// of SIGTERM, and the tests expect it to. TestTimeoutEscalatesToSIGKILL,
// which needs the escalation, has its own.
func testRunner() *Runner {
	return NewRunner(Config{KillGrace: time.Minute, DrainTimeout: time.Minute})
}

// patience bounds every wait for something that must happen soon.
const patience = 30 * time.Second

type attempt struct {
	dir, log string
}

func newAttempt(t *testing.T) attempt {
	base := t.TempDir()
	return attempt{dir: filepath.Join(base, "work"), log: filepath.Join(base, "logs", "attempt.log")}
}

func (a attempt) spec(script string, env ...string) Spec {
	return Spec{Args: []string{"sh", "-c", script}, Env: append(append([]string(nil), testEnv...), env...), Dir: a.dir, LogPath: a.log}
}

func start(t *testing.T, r *Runner, s Spec) *Process {
	t.Helper()
	p, err := r.Start(s)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		p.Abort("test cleanup")
		<-p.Done()
	})
	return p
}

// alive: the pid runs (a zombie is dead: PID 1 here may never reap).
func alive(pid int) bool {
	st, err := readStat(pid)
	return err == nil && !st.zombie()
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	var pid int
	testkit.Eventually(t, path, patience, func() bool {
		b, err := os.ReadFile(path)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

func TestExitCodes(t *testing.T) {
	cases := []struct {
		script  string
		code    int
		signal  string
		outcome contract.Outcome
		errCode string
	}{
		{"exit 0", 0, "", contract.Failed, contract.CodeOutputsMissing},
		{"exit 3", 3, "", contract.Crashed, machine.CodeCrashed},
		{"echo 'Error: Missing option' >&2; exit 2", 2, "", contract.Failed, contract.CodeUsageError},
		{"kill -KILL $$", -1, "killed", contract.Crashed, machine.CodeCrashed},
		{"kill -SEGV $$", -1, "segmentation fault", contract.Crashed, machine.CodeCrashed},
	}
	r := testRunner()
	for _, tc := range cases {
		t.Run(tc.script, func(t *testing.T) {
			a := newAttempt(t)
			st := start(t, r, a.spec("echo oops >&2; "+tc.script)).Wait()
			if st.Code != tc.code || st.Signal != tc.signal || st.TimedOut || st.Aborted || st.Err != nil {
				t.Fatalf("status %+v, want code %d signal %q", st, tc.code, tc.signal)
			}
			if len(st.StderrTail) == 0 || st.StderrTail[0] != "oops" || len(st.StdoutTail) != 0 {
				t.Errorf("tails %q %q", st.StdoutTail, st.StderrTail)
			}
			if !st.Ended.After(st.Started) {
				t.Errorf("times %v %v", st.Started, st.Ended)
			}
			res, err := contract.ClassifyDir(filepath.Join(a.dir, "out"), st.Contract())
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != tc.outcome || res.Error.Code != tc.errCode {
				t.Errorf("classified %s %v, want %s %s", res.Outcome, res.Error, tc.outcome, tc.errCode)
			}
			if tc.outcome == contract.Crashed && !strings.Contains(res.Error.Message, "oops") {
				t.Errorf("crash message lacks stderr: %q", res.Error.Message)
			}
		})
	}
}

func TestErrorDocumentClassification(t *testing.T) {
	src := filepath.Join(t.TempDir(), "error.pb")
	doc, err := proto.Marshal(&core.ErrorDocument{Error: &core.ContainerError{
		Code: "NonRecoverableError", Message: "cannot go on",
		Kind: core.ContainerError_NON_RECOVERABLE, Origin: core.ExecutionError_USER,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	r := testRunner()
	for _, tc := range []struct {
		name, script string
		outcome      contract.Outcome
	}{
		{"error document, exit 0", `mkdir -p "$OUT" && cp "$SRC" "$OUT/error.pb"`, contract.Failed},
		{"error document, exit 1", `mkdir -p "$OUT" && cp "$SRC" "$OUT/error.pb"; exit 1`, contract.Failed},
		{"outputs", `mkdir -p "$OUT" && : > "$OUT/outputs.pb"`, contract.Succeeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAttempt(t)
			out := filepath.Join(filepath.Dir(a.dir), "out")
			st := start(t, r, a.spec(tc.script, "OUT="+out, "SRC="+src)).Wait()
			res, err := contract.ClassifyDir(out, st.Contract())
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != tc.outcome {
				t.Fatalf("outcome %s (%v), want %s", res.Outcome, res.Error, tc.outcome)
			}
			if tc.outcome == contract.Failed {
				if e := res.Error; e.Kind != machine.KindUser || e.Recoverable || e.Code != "NonRecoverableError" || e.Message != "cannot go on" {
					t.Errorf("error %v", e)
				}
			}
		})
	}
}

func TestWorkingDirectory(t *testing.T) {
	r := testRunner()
	a := newAttempt(t)
	st := start(t, r, a.spec("pwd; touch made-here")).Wait()
	if st.Code != 0 {
		t.Fatalf("status %+v", st)
	}
	if _, err := os.Stat(filepath.Join(a.dir, "made-here")); err != nil {
		t.Errorf("file not in the working dir: %v", err)
	}
	lines, err := ReadLog(a.log)
	if err != nil {
		t.Fatal(err)
	}
	if got := messages(lines, Stdout); len(got) != 1 || got[0] != a.dir {
		t.Errorf("pwd printed %q, want %s", got, a.dir)
	}

	// The directory now has a file: a second attempt may not reuse it.
	if _, err := r.Start(a.spec("true")); !errors.Is(err, errs.ErrAlreadyExists) {
		t.Errorf("reused working dir: %v", err)
	}
	for _, dir := range []string{"relative/dir", "/", ""} {
		s := a.spec("true")
		s.Dir = dir
		if _, err := r.Start(s); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("dir %q: %v", dir, err)
		}
	}
	if _, err := r.Start(Spec{Dir: a.dir, LogPath: a.log}); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("empty argv: %v", err)
	}
	b := newAttempt(t)
	s := b.spec("true")
	s.LogPath = ""
	if _, err := r.Start(s); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("no log path: %v", err)
	}
}

func TestBinDirResolvesA0(t *testing.T) {
	bin := t.TempDir()
	script := "#!/bin/sh\necho \"a0 ran $*\"\necho \"PATH=$PATH\"\n"
	if err := os.WriteFile(filepath.Join(bin, "a0"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r := NewRunner(Config{BinDir: bin})
	a := newAttempt(t)
	p := start(t, r, Spec{Args: []string{"a0", "--inputs", "x"}, Env: testEnv, Dir: a.dir, LogPath: a.log})
	if st := p.Wait(); st.Code != 0 {
		t.Fatalf("status %+v", st)
	}
	lines, _ := ReadLog(a.log)
	got := messages(lines, Stdout)
	if len(got) != 2 || got[0] != "a0 ran --inputs x" || got[1] != "PATH="+bin+":"+strings.TrimPrefix(testEnv[0], "PATH=") {
		t.Errorf("stdout %q", got)
	}
	if !strings.Contains(messages(lines, System)[0], filepath.Join(bin, "a0")) {
		t.Errorf("start line %q", messages(lines, System)[0])
	}

	b := newAttempt(t)
	_, err := NewRunner(Config{BinDir: t.TempDir()}).Start(Spec{Args: []string{"a0"}, Env: []string{"PATH=/nonexistent"}, Dir: b.dir, LogPath: b.log})
	if !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("missing a0: %v", err)
	}
	if lines, _ := ReadLog(b.log); len(lines) != 1 || !strings.Contains(lines[0].Message, "not found") {
		t.Errorf("log of a failed start: %+v", lines)
	}
	if got := withBinDir([]string{"A=1"}, "/venv/bin"); got[1] != "PATH=/venv/bin" {
		t.Errorf("no PATH: %q", got)
	}
	if got := withBinDir([]string{"PATH=/venv/bin:/bin"}, "/venv/bin"); got[0] != "PATH=/venv/bin:/bin" {
		t.Errorf("already first: %q", got)
	}
}

func TestTimeoutKillsTheGroup(t *testing.T) {
	r := testRunner()
	a := newAttempt(t)
	// The timeout must fire after the grandchild exists: generous, since
	// the wait for it below is what takes the time.
	s := a.spec(`sleep 60 & echo $! > "$PWD/child.pid"; sleep 60`)
	s.Timeout = 3 * time.Second
	p := start(t, r, s)
	child := readPid(t, filepath.Join(a.dir, "child.pid"))
	st := p.Wait()
	if !st.TimedOut || st.Aborted || st.Signal != "terminated" {
		t.Fatalf("status %+v", st)
	}
	testkit.Eventually(t, "the grandchild to die", patience, func() bool { return !alive(child) })
	if GroupAlive(p.Identity()) {
		t.Error("group still alive")
	}
	res := contract.Classify(st.Contract(), nil, false)
	if res.Outcome != contract.TimedOut {
		t.Errorf("classified %s", res.Outcome)
	}
	lines, _ := ReadLog(a.log)
	if !containsMsg(lines, System, "timeout of 3s reached") {
		t.Errorf("log: %+v", lines)
	}
}

func TestTimeoutEscalatesToSIGKILL(t *testing.T) {
	r := NewRunner(Config{KillGrace: 300 * time.Millisecond, DrainTimeout: time.Minute})
	a := newAttempt(t)
	// Ignored signals stay ignored across exec: nothing here dies of
	// SIGTERM. The timeout must fire after the trap is set: generous.
	s := a.spec(`trap "" TERM; sleep 60 & echo $! > "$PWD/child.pid"; while :; do sleep 0.05; done`)
	s.Timeout = 3 * time.Second
	p := start(t, r, s)
	child := readPid(t, filepath.Join(a.dir, "child.pid"))
	st := p.Wait()
	if !st.TimedOut || st.Signal != "killed" {
		t.Fatalf("status %+v", st)
	}
	// A lower bound only: a slow machine makes it longer, never shorter.
	if d := st.Ended.Sub(st.Started); d < 3300*time.Millisecond {
		t.Errorf("killed after %s, before timeout + grace", d)
	}
	testkit.Eventually(t, "the grandchild to die", patience, func() bool { return !alive(child) })
	lines, _ := ReadLog(a.log)
	if !containsMsg(lines, System, "sending SIGKILL") {
		t.Errorf("log: %+v", lines)
	}
}

func TestAbortKillsTheTree(t *testing.T) {
	r := testRunner()
	a := newAttempt(t)
	// One grandchild stays in the group, one escapes into its own session.
	p := start(t, r, a.spec(`sleep 60 & echo $! > "$PWD/c1.pid"; setsid sleep 60 & echo $! > "$PWD/c2.pid"; wait`))
	c1 := readPid(t, filepath.Join(a.dir, "c1.pid"))
	c2 := readPid(t, filepath.Join(a.dir, "c2.pid"))
	testkit.Eventually(t, "setsid", patience, func() bool {
		st, err := readStat(c2)
		return err == nil && st.pgrp == c2
	})
	p.Abort("user asked")
	p.Abort("again")
	st := p.Wait()
	if !st.Aborted || st.AbortReason != "user asked" || st.TimedOut || st.Signal != "terminated" {
		t.Fatalf("status %+v", st)
	}
	testkit.Eventually(t, "the tree to die", patience, func() bool { return !alive(c1) && !alive(c2) })
	if res := contract.Classify(st.Contract(), nil, false); res.Outcome != contract.Aborted {
		t.Errorf("classified %s", res.Outcome)
	}
	p.Abort("after the end") // no effect, no block
}

func TestLeftoversAreKilledAfterANormalExit(t *testing.T) {
	r := testRunner()
	a := newAttempt(t)
	p := start(t, r, a.spec(`sleep 60 & echo $! > "$PWD/child.pid"; exit 0`))
	st := p.Wait()
	if st.Code != 0 {
		t.Fatalf("status %+v", st)
	}
	child := readPid(t, filepath.Join(a.dir, "child.pid"))
	testkit.Eventually(t, "the leftover to die", patience, func() bool { return !alive(child) })
	lines, _ := ReadLog(a.log)
	if !containsMsg(lines, System, "the attempt left running") {
		t.Errorf("log: %+v", lines)
	}
}

// startForeign starts a process group the way a previous manager would have,
// outside any Runner, and returns it with the pid of a grandchild.
func startForeign(t *testing.T, script string) (*exec.Cmd, int) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	return cmd, child
}

func TestKillOrphan(t *testing.T) {
	cmd, child := startForeign(t, `sleep 60 & echo $!; exec sleep 60`)
	id, err := ReadIdentity(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if id.PID != cmd.Process.Pid || id.PGID != id.PID || id.StartTicks == 0 || id.BootID == "" {
		t.Fatalf("identity %+v", id)
	}
	if !GroupAlive(id) {
		t.Fatal("live group reported dead")
	}

	// The recycled-pid guard: same pid, another start time, means another
	// process. It must be left alone.
	recycled := id
	recycled.StartTicks++
	otherBoot := id
	otherBoot.BootID = "00000000-0000-0000-0000-000000000000"
	for name, fake := range map[string]Identity{"recycled pid": recycled, "other boot": otherBoot} {
		if GroupAlive(fake) {
			t.Errorf("%s: reported alive", name)
		}
		killed, err := KillOrphan(fake, 100*time.Millisecond)
		if killed || err != nil {
			t.Errorf("%s: KillOrphan = %v, %v", name, killed, err)
		}
	}
	// A signal sent to a process is pending (or has killed it) by the time
	// kill(2) returns, so no sleep is needed to see that none was sent.
	for _, pid := range []int{id.PID, child} {
		if !alive(pid) || signalPending(t, pid) {
			t.Fatalf("a guarded KillOrphan signalled pid %d", pid)
		}
	}

	killed, err := KillOrphan(id, patience) // sleep dies of SIGTERM: no escalation
	if !killed || err != nil {
		t.Fatalf("KillOrphan = %v, %v", killed, err)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Errorf("leader ended with %v", err)
	}
	testkit.Eventually(t, "the grandchild to die", patience, func() bool { return !alive(child) })
	if GroupAlive(id) {
		t.Error("dead group reported alive")
	}
	if killed, err := KillOrphan(id, 100*time.Millisecond); killed || err != nil {
		t.Errorf("second KillOrphan = %v, %v", killed, err)
	}
}

func TestKillOrphanAfterTheLeaderDied(t *testing.T) {
	// The leader is gone (reaped); a grandchild still holds the group.
	cmd, child := startForeign(t, `trap "" TERM; sleep 60 & echo $!`)
	id, err := ReadIdentity(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if alive(id.PID) {
		t.Fatal("leader still alive")
	}
	if !GroupAlive(id) {
		t.Fatal("group with a live member reported dead")
	}
	killed, err := KillOrphan(id, 100*time.Millisecond) // SIGTERM is ignored: needs SIGKILL
	if !killed || err != nil {
		t.Fatalf("KillOrphan = %v, %v", killed, err)
	}
	if alive(child) {
		t.Error("grandchild survived")
	}
}

func TestParseStat(t *testing.T) {
	line := "4242 (we ird) (name)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 50"
	st, err := parseStat([]byte(line))
	if err != nil || st.state != 'S' || st.ppid != 1 || st.pgrp != 4242 || st.startTicks != 987654 {
		t.Errorf("parsed %+v, %v", st, err)
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 no-paren S", "1 (x) S a b c d e f g h i j k l m n o p q r s t u"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if _, err := ReadIdentity(-5); err == nil {
		t.Error("identity of pid -5")
	}
}

// TestPdeathsig kills a "manager" (this test binary re-executed) with SIGKILL
// and expects its attempt process to die with it.
func TestPdeathsig(t *testing.T) {
	if os.Getenv("FMGR_PROCESS_HELPER") != "" {
		t.Skip("helper")
	}
	dir := t.TempDir()
	helper := exec.Command(os.Args[0], "-test.run=^TestHelperManager$", "-test.v")
	helper.Env = append(os.Environ(), "FMGR_PROCESS_HELPER="+dir)
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	defer helper.Wait()
	defer helper.Process.Kill()
	sc := bufio.NewScanner(out)
	pid, churned := 0, false
	for !churned && sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "ATTEMPT PID "); ok {
			pid, _ = strconv.Atoi(v)
		}
		churned = sc.Text() == "CHURNED"
	}
	if pid == 0 || !churned {
		t.Fatalf("helper did not report its attempt and its thread churn (pid %d)", pid)
	}
	// The manager's other goroutines ran on other threads, which the
	// runtime may retire: the attempt must survive that (it is tied to its
	// locked thread only).
	if !alive(pid) {
		t.Fatal("attempt died while its manager lived")
	}
	if err := helper.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the attempt to die with its manager", patience, func() bool { return !alive(pid) })
	// Its cgroup outlives the manager; a restarted manager's recovery
	// removes it, as this does.
	if _, err := NewRunner(Config{}).KillCgroup(filepath.Join(dir, "work")); err != nil {
		t.Errorf("removing the dead manager's attempt cgroup: %v", err)
	}
}

func TestHelperManager(t *testing.T) {
	dir := os.Getenv("FMGR_PROCESS_HELPER")
	if dir == "" {
		t.Skip("only run by TestPdeathsig")
	}
	r := NewRunner(Config{})
	p, err := r.Start(Spec{Args: []string{"sleep", "60"}, Env: testEnv, Dir: filepath.Join(dir, "work"), LogPath: filepath.Join(dir, "a.log")})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("ATTEMPT PID %d\n", p.Identity().PID)
	// Churn threads so a non-locked design would lose its forking thread.
	var wg sync.WaitGroup
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread() // exits locked: the runtime kills the thread
			time.Sleep(time.Millisecond)
		}()
	}
	wg.Wait()
	fmt.Println("CHURNED")
	p.Wait()
}

// signalPending reports whether pid has a signal pending (for the process
// or its thread); a fatal signal shows as a pending SIGKILL until it dies.
func signalPending(t *testing.T, pid int) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return true // gone
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		if (k == "SigPnd" || k == "ShdPnd") && strings.Trim(strings.TrimSpace(v), "0") != "" {
			return true
		}
	}
	return false
}
