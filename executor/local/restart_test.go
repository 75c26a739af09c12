package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/local/process"
	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/store"
	"fmgr.dev/internal/testkit"
)

// overlapCheck is the start of a script's later attempts: if a process the
// first attempt started (pids in $SHARED/pids) still runs, two attempts
// overlap and $SHARED/overlap says so.
const overlapCheck = `for p in $(cat "$SHARED/pids"); do
  s=$(cut -d' ' -f3 "/proc/$p/stat" 2>/dev/null)
  if [ -n "$s" ] && [ "$s" != Z ] && [ "$s" != X ]; then echo "$p still runs" >> "$SHARED/overlap"; fi
done
`

// longFirstAttempt runs for a minute on attempt 1 (recording its pid and a
// grandchild's) and succeeds quickly on later attempts.
const longFirstAttempt = `if [ "$FLYTE_ATTEMPT_NUMBER" = 0 ]; then
  sleep 60 & echo "$! $$" > "$SHARED/pids.tmp"; mv "$SHARED/pids.tmp" "$SHARED/pids"; wait; exit 0
fi
` + overlapCheck + succeed

func (h *harness) firstAttemptPids() []int {
	h.t.Helper()
	var pids []int
	testkit.Eventually(h.t, "the first attempt's pids", 20*time.Second, func() bool {
		pids = pids[:0]
		for _, f := range strings.Fields(h.readShared("pids")) {
			pids = append(pids, atoi(f))
		}
		return len(pids) == 2
	})
	return pids
}

// A manager that dies mid-run (simulated: the driver stops without touching
// its attempts, which keep running) is replaced by a new one on the same
// database and work dir: the orphan is stopped first, then retried.
func TestRestartRecoversOrphans(t *testing.T) {
	for _, tc := range []struct {
		name         string
		lostIdentity bool // the manager died before writing process.json
		garbled      bool // process.json is unreadable
		want         string
	}{
		{"recorded", false, false, "was still running and has been stopped"},
		{"unrecorded", true, false, "leftover process(es) in its directory were stopped"},
		{"unreadable record", false, true, "its process record was unreadable, and 2 leftover process(es) in its directory were stopped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachDB(t, func(t *testing.T, h *harness) {
				d1 := h.driver()
				key := h.run("rcrash", longFirstAttempt, taskOpts{})
				h.wait(key, "RUNNING", 20*time.Second, func(a *store.Action) bool { return a.Phase == phase.Running })
				pids := h.firstAttemptPids()

				d1.abandon()
				dir, _ := attemptDir(h.workDir, key, 1)
				if tc.lostIdentity {
					if err := os.Remove(filepath.Join(dir, identityFile)); err != nil {
						t.Fatal(err)
					}
				}
				if tc.garbled {
					writeFile(t, filepath.Join(dir, identityFile), `{"action": "half a rec`, 0o644)
				}
				time.Sleep(100 * time.Millisecond)
				for _, p := range pids {
					if !alive(p) {
						t.Fatalf("pid %d died with the driver: the test simulates nothing", p)
					}
				}

				h.driver()
				a := h.terminal(key, phase.Succeeded, 30*time.Second)
				for _, p := range pids {
					if alive(p) {
						t.Errorf("orphan %d survived the restart", p)
					}
				}
				if o := h.readShared("overlap"); o != "" {
					t.Errorf("attempts overlapped: %s", o)
				}
				atts := h.attempts(key)
				if a.Attempts != 2 || len(atts) != 2 {
					t.Fatalf("%d attempts", len(atts))
				}
				e := execErr(atts[0].ErrorInfo)
				if atts[0].Phase != phase.Failed || e.GetCode() != machine.CodeOrphaned || e.GetKind() != core.ExecutionError_SYSTEM ||
					!strings.Contains(e.GetMessage(), "manager restarted while attempt 1 was running") || !strings.Contains(e.GetMessage(), tc.want) {
					t.Errorf("attempt 1: %s %v", atts[0].Phase.String(), e)
				}
			})
		})
	}
}

// A graceful stop stops running attempts and records them as interrupted, so
// the next start simply runs the new attempt.
func TestGracefulStop(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		d1 := h.driver()
		key := h.run("rstop", longFirstAttempt, taskOpts{})
		h.wait(key, "RUNNING", 20*time.Second, func(a *store.Action) bool { return a.Phase == phase.Running })
		pids := h.firstAttemptPids()

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d1.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if d1.Ready() == nil {
			t.Error("a stopped driver is ready")
		}
		for _, p := range pids {
			if alive(p) {
				t.Errorf("pid %d survived the stop", p)
			}
		}
		a, _ := h.st.Actions.Get(h.ctx, key)
		atts := h.attempts(key)
		e := execErr(atts[0].ErrorInfo)
		if a.Phase != phase.Queued || a.Attempts != 2 || e.GetCode() != machine.CodeOrphaned ||
			!strings.Contains(e.GetMessage(), "shutting down") {
			t.Fatalf("after stop: %s attempt %d, error %v", a.Phase.String(), a.Attempts, e)
		}

		h.driver()
		h.terminal(key, phase.Succeeded, 30*time.Second)
		if o := h.readShared("overlap"); o != "" {
			t.Errorf("attempts overlapped: %s", o)
		}
	})
}

// After a crash the parent and its running child are retried; a child still
// waiting for a slot simply runs; the new parent attempt sees all of them
// through.
func TestRestartWithChildren(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		one := func(c *config.LocalExecutor) { c.MaxParallelism = 1 }
		d1 := h.driver(one)
		root := h.run("rkids", `if [ "$FLYTE_ATTEMPT_NUMBER" = 0 ]; then exec sleep 60; fi
i=0; while [ $i -lt 600 ] && [ ! -e "$SHARED/go" ]; do sleep 0.05; i=$((i+1)); done; `+succeed, taskOpts{})
		h.wait(root, "RUNNING", 20*time.Second, func(a *store.Action) bool { return a.Phase == phase.Running })
		c1 := h.child(root, "c1", `if [ "$FLYTE_ATTEMPT_NUMBER" = 0 ]; then exec sleep 60; fi; `+succeed, taskOpts{})
		h.wait(c1, "RUNNING", 20*time.Second, func(a *store.Action) bool { return a.Phase == phase.Running })
		c2 := h.child(root, "c2", succeed, taskOpts{})
		h.wait(c2, "WAITING_FOR_RESOURCES", 20*time.Second, func(a *store.Action) bool { return a.Phase == phase.WaitingForResources })

		d1.abandon()
		h.driver(one)
		// The root (like the SDK in a parent) ends once its children did.
		for k, attempts := range map[store.ActionKey]int32{c1: 2, c2: 1} {
			if a := h.terminal(k, phase.Succeeded, 30*time.Second); a.Attempts != attempts {
				t.Errorf("%s: %d attempts, want %d", k.Name, a.Attempts, attempts)
			}
		}
		if a, _ := h.st.Actions.Get(h.ctx, root); a.Phase.Terminal() || a.Attempts != 2 {
			t.Errorf("root: %s, %d attempts", a.Phase.String(), a.Attempts)
		}
		writeFile(t, h.sharedFile("go"), "", 0o644)
		if a := h.terminal(root, phase.Succeeded, 30*time.Second); a.Attempts != 2 {
			t.Errorf("root: %d attempts, want 2", a.Attempts)
		}
	})
}

// Two drivers never share a work dir.
func TestWorkDirIsExclusive(t *testing.T) {
	h := newHarness(t, "sqlite://"+filepath.Join(t.TempDir(), "manager.db"))
	h.driver()
	d2 := New(h.state, config.Executor{Local: config.LocalExecutor{WorkDir: h.workDir, MaxParallelism: 1}}, func() string { return "x:1" }, h.log)
	err := d2.Start(h.ctx)
	if err == nil || !strings.Contains(err.Error(), "in use by another flyte-manager") {
		t.Fatalf("second driver on one work dir: %v", err)
	}
	if d2.Ready() == nil {
		t.Error("a driver that could not start is ready")
	}
}

// Run stops gracefully when its context ends, as the manager's shutdown does.
func TestRunStopsWhenItsContextEnds(t *testing.T) {
	h := newHarness(t, "sqlite://"+filepath.Join(t.TempDir(), "manager.db"))
	var d *Driver
	h.state, d = newState(h, func(state *runstate.Service) *Driver {
		return New(state, config.Executor{Local: config.LocalExecutor{Python: h.binDir, WorkDir: h.workDir, MaxParallelism: 2, SystemRetries: 1}},
			func() string { return "localhost:1" }, h.log)
	})
	d.killGrace = 500 * time.Millisecond
	if d.Ready() == nil {
		t.Error("ready before it started")
	}
	ctx, cancel := context.WithCancel(h.ctx)
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx) }()
	testkit.Eventually(t, "readiness", 10*time.Second, func() bool { return d.Ready() == nil })

	key := h.run("rrun", longFirstAttempt, taskOpts{})
	h.wait(key, "RUNNING", 20*time.Second, func(a *store.Action) bool { return a.Phase == phase.Running })
	pids := h.firstAttemptPids()
	cancel()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	for _, p := range pids {
		if alive(p) {
			t.Errorf("pid %d survived", p)
		}
	}
	if a, _ := h.st.Actions.Get(h.ctx, key); a.Phase != phase.Queued || a.Attempts != 2 {
		t.Errorf("after Run: %s attempt %d", a.Phase.String(), a.Attempts)
	}
}

// abortInfo is a stored AbortInfo with reason.
func abortInfo(t *testing.T, reason string) []byte {
	t.Helper()
	b, err := proto.Marshal(&workflow.AbortInfo{Reason: reason})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// countRuns is the start of a script that counts its runs in $SHARED/<name>.runs.
func countRuns(name string) string { return `echo x >> "$SHARED/` + name + `.runs"; ` }

func (h *harness) runsOf(name string) int { return strings.Count(h.readShared(name+".runs"), "x") }

// An abort requested (through the API of another manager) while the
// manager that ran the attempt was down: the next manager stops what is left
// of the attempt and records ABORTED; nothing runs again.
func TestRestartAbortRequestedWhileDown(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		d1 := h.driver()
		key := h.run("rabortdown", countRuns("rabortdown")+`sleep 60 & echo "$! $$" > "$SHARED/pids.tmp"; mv "$SHARED/pids.tmp" "$SHARED/pids"; wait`, taskOpts{retries: 2})
		h.wait(key, "RUNNING", 20*time.Second, func(a *store.Action) bool { return a.Phase == phase.Running })
		pids := h.firstAttemptPids()
		d1.abandon()
		if _, err := h.st.Actions.RequestAbort(h.ctx, key, abortInfo(t, "stop it")); err != nil {
			t.Fatal(err)
		}

		h.driver()
		a := h.terminal(key, phase.Aborted, 30*time.Second)
		for _, p := range pids {
			if alive(p) {
				t.Errorf("pid %d of the aborted attempt survived", p)
			}
		}
		atts := h.attempts(key)
		if a.Attempts != 1 || len(atts) != 1 || atts[0].Phase != phase.Aborted || h.runsOf("rabortdown") != 1 {
			t.Fatalf("%d attempts %+v, %d runs", a.Attempts, atts, h.runsOf("rabortdown"))
		}
		if reason := attempt.AbortReason(a); reason != "stop it" {
			t.Errorf("abort reason %q", reason)
		}
	})
}

// A process that ended while no manager watched it, after it wrote its
// outputs (or its error file), has ended: the next manager records it from
// the file, with a warning in the attempt's log, and does not run it again.
// An abort requested after that success does not undo it.
func TestRestartRecordsAResultWrittenWhileDown(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		d1 := h.driver()
		// Each script blocks until $SHARED/finish exists, then ends.
		block := `while [ ! -e "$SHARED/finish" ]; do sleep 0.05; done; `
		ok := h.run("rdownok", countRuns("rdownok")+block+succeed, taskOpts{retries: 2})
		fatal := h.run("rdownerr", countRuns("rdownerr")+block+`cp "$FIXTURES/fatal.pb" "$2/error.pb"; exit 1`, taskOpts{retries: 2})
		late := h.run("rdownlate", countRuns("rdownlate")+block+succeed, taskOpts{retries: 2})
		for _, k := range []store.ActionKey{ok, fatal, late} {
			h.wait(k, "RUNNING", 20*time.Second, func(a *store.Action) bool { return a.Phase == phase.Running })
		}
		d1.abandon()
		// The processes end while no driver watches them.
		writeFile(t, h.sharedFile("finish"), "", 0o644)
		for _, k := range []store.ActionKey{ok, fatal, late} {
			dir, _ := attemptDir(h.workDir, k, 1)
			cwd := filepath.Join(dir, cwdDir)
			testkit.Eventually(t, k.RunName+"'s process to end", 30*time.Second, func() bool { return len(process.FindInDir(cwd)) == 0 })
		}
		if _, err := h.st.Actions.RequestAbort(h.ctx, late, abortInfo(t, "too late")); err != nil {
			t.Fatal(err)
		}

		h.driver()
		for _, k := range []store.ActionKey{ok, late} {
			a := h.terminal(k, phase.Succeeded, 30*time.Second)
			atts := h.attempts(k)
			if a.Attempts != 1 || len(atts) != 1 || atts[0].Phase != phase.Succeeded || atts[0].OutputURI == "" || h.runsOf(k.RunName) != 1 {
				t.Errorf("%s: %d attempts %+v, %d runs", k.RunName, a.Attempts, atts, h.runsOf(k.RunName))
			}
			lines, err := process.ReadLog(h.logPath(k, 1))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(lines, func(l process.Line) bool {
				return l.Stream == process.System && strings.Contains(l.Message, "warning:") && strings.Contains(l.Message, "no manager watched it")
			}) {
				t.Errorf("%s: no warning in the attempt's log: %+v", k.RunName, lines)
			}
		}
		a := h.terminal(fatal, phase.Failed, 30*time.Second)
		if e := execErr(a.ErrorInfo); a.Attempts != 1 || e.GetCode() != "NonRecoverableError" || h.runsOf("rdownerr") != 1 {
			t.Errorf("rdownerr: %d attempts, error %v, %d runs", a.Attempts, e, h.runsOf("rdownerr"))
		}
	})
}

// Restarts are the platform's failures, paid from the system budget: when
// they have spent it the action ends FAILED with a message saying so.
func TestRestartsSpendTheSystemBudget(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		one := func(c *config.LocalExecutor) { c.SystemRetries = 1 }
		d := h.driver(one)
		key := h.run("rbudget", countRuns("rbudget")+`exec sleep 60`, taskOpts{retries: 3})
		for n := int32(1); n <= 2; n++ {
			// RUNNING is recorded once the process started; the script
			// counts itself a moment later: wait for both, so the kill
			// really hits the running task.
			h.wait(key, fmt.Sprintf("RUNNING attempt %d, counted", n), 30*time.Second, func(a *store.Action) bool {
				return a.Phase == phase.Running && a.Attempts == n && h.runsOf("rbudget") == int(n)
			})
			d.abandon()
			d = h.driver(one)
		}
		a := h.terminal(key, phase.Failed, 30*time.Second)
		e := execErr(a.ErrorInfo)
		if a.Attempts != 2 || h.runsOf("rbudget") != 2 || e.GetCode() != machine.CodeOrphaned || e.GetKind() != core.ExecutionError_SYSTEM ||
			!strings.Contains(e.GetMessage(), "the system retry budget is spent, 1 of 1 used") {
			t.Fatalf("%d attempts, %d runs, error %v", a.Attempts, h.runsOf("rbudget"), e)
		}
	})
}

// An abort racing the attempt's own end: whichever the driver sees first
// wins, consistently: a success the process reached is SUCCEEDED (its
// outputs recorded), an abort that came first is ABORTED, never a mix, and
// nothing runs twice.
func TestAbortRacingCompletion(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		h.driver()
		const n = 4 // the harness's slots: all run at once
		var keys []store.ActionKey
		for i := range n {
			name := fmt.Sprintf("rrace%d", i)
			keys = append(keys, h.run(name, countRuns(name)+`while [ ! -e "$SHARED/go" ]; do sleep 0.02; done; `+succeed, taskOpts{retries: 2}))
		}
		for _, k := range keys {
			// RUNNING is recorded once the process started; the abort must
			// also find its script started (it counts its run first).
			h.wait(k, "RUNNING with its script started", 30*time.Second, func(a *store.Action) bool {
				return a.Phase == phase.Running && h.runsOf(k.RunName) == 1
			})
		}
		writeFile(t, h.sharedFile("go"), "", 0o644)
		for _, k := range keys {
			if err := h.state.Abort(h.ctx, k, "racing", ""); err != nil {
				t.Fatal(err)
			}
		}
		seen := map[phase.Phase]int{}
		for _, k := range keys {
			a := h.wait(k, "terminal", 30*time.Second, func(a *store.Action) bool { return a.Phase.Terminal() })
			atts := h.attempts(k)
			seen[a.Phase]++
			if len(atts) != 1 || atts[0].Phase != a.Phase || h.runsOf(k.RunName) != 1 {
				t.Errorf("%s: %s with attempts %+v, %d runs", k.RunName, a.Phase.String(), atts, h.runsOf(k.RunName))
			}
			switch a.Phase {
			case phase.Succeeded:
				if atts[0].OutputURI == "" || len(a.ErrorInfo) != 0 {
					t.Errorf("%s: SUCCEEDED without its outputs or with an error: %+v", k.RunName, atts[0])
				}
			case phase.Aborted:
			default:
				t.Errorf("%s ended %s", k.RunName, a.Phase.String())
			}
		}
		t.Logf("outcomes: %d succeeded, %d aborted", seen[phase.Succeeded], seen[phase.Aborted])
	})
}
