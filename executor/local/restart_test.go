package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/store"
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
const longFirstAttempt = `if [ "$FLYTE_ATTEMPT_NUMBER" = 1 ]; then
  sleep 60 & echo "$! $$" > "$SHARED/pids.tmp"; mv "$SHARED/pids.tmp" "$SHARED/pids"; wait; exit 0
fi
` + overlapCheck + succeed

func (h *harness) firstAttemptPids() []int {
	h.t.Helper()
	var pids []int
	eventually(h.t, "the first attempt's pids", 20*time.Second, func() bool {
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
		want         string
	}{
		{"recorded", false, "was still running and has been stopped"},
		{"unrecorded", true, "leftover process(es) in its directory were stopped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachDB(t, func(t *testing.T, h *harness) {
				d1 := h.driver()
				key := h.run("rcrash", longFirstAttempt, taskOpts{})
				h.wait(key, "RUNNING", 20*time.Second, func(a *store.Action) bool { return a.Phase == store.PhaseRunning })
				pids := h.firstAttemptPids()

				d1.abandon()
				if tc.lostIdentity {
					dir, _ := attemptDir(h.workDir, key, 1)
					if err := os.Remove(filepath.Join(dir, identityFile)); err != nil {
						t.Fatal(err)
					}
				}
				time.Sleep(100 * time.Millisecond)
				for _, p := range pids {
					if !alive(p) {
						t.Fatalf("pid %d died with the driver: the test simulates nothing", p)
					}
				}

				h.driver()
				a := h.terminal(key, store.PhaseSucceeded, 30*time.Second)
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
				if atts[0].Phase != store.PhaseFailed || e.GetCode() != machine.CodeOrphaned || e.GetKind() != core.ExecutionError_SYSTEM ||
					!strings.Contains(e.GetMessage(), "manager restarted while attempt 1 was running") || !strings.Contains(e.GetMessage(), tc.want) {
					t.Errorf("attempt 1: %s %v", phaseOf(&store.Action{Phase: atts[0].Phase}), e)
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
		h.wait(key, "RUNNING", 20*time.Second, func(a *store.Action) bool { return a.Phase == store.PhaseRunning })
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
		if a.Phase != store.PhaseQueued || a.Attempts != 2 || e.GetCode() != machine.CodeOrphaned ||
			!strings.Contains(e.GetMessage(), "shutting down") {
			t.Fatalf("after stop: %s attempt %d, error %v", phaseOf(a), a.Attempts, e)
		}

		h.driver()
		h.terminal(key, store.PhaseSucceeded, 30*time.Second)
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
		root := h.run("rkids", `if [ "$FLYTE_ATTEMPT_NUMBER" = 1 ]; then exec sleep 60; fi
i=0; while [ $i -lt 600 ] && [ ! -e "$SHARED/go" ]; do sleep 0.05; i=$((i+1)); done; `+succeed, taskOpts{})
		h.wait(root, "RUNNING", 20*time.Second, func(a *store.Action) bool { return a.Phase == store.PhaseRunning })
		c1 := h.child(root, "c1", `if [ "$FLYTE_ATTEMPT_NUMBER" = 1 ]; then exec sleep 60; fi; `+succeed, taskOpts{})
		h.wait(c1, "RUNNING", 20*time.Second, func(a *store.Action) bool { return a.Phase == store.PhaseRunning })
		c2 := h.child(root, "c2", succeed, taskOpts{})
		h.wait(c2, "WAITING_FOR_RESOURCES", 20*time.Second, func(a *store.Action) bool { return a.Phase == store.PhaseWaitingForResources })

		d1.abandon()
		h.driver(one)
		// The root (like the SDK in a parent) ends once its children did.
		for k, attempts := range map[store.ActionKey]int32{c1: 2, c2: 1} {
			if a := h.terminal(k, store.PhaseSucceeded, 30*time.Second); a.Attempts != attempts {
				t.Errorf("%s: %d attempts, want %d", k.Name, a.Attempts, attempts)
			}
		}
		if a, _ := h.st.Actions.Get(h.ctx, root); a.Phase.Terminal() || a.Attempts != 2 {
			t.Errorf("root: %s, %d attempts", phaseOf(a), a.Attempts)
		}
		writeFile(t, h.sharedFile("go"), "", 0o644)
		if a := h.terminal(root, store.PhaseSucceeded, 30*time.Second); a.Attempts != 2 {
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
	d := New(h.state, config.Executor{Local: config.LocalExecutor{Python: h.binDir, WorkDir: h.workDir, MaxParallelism: 2, SystemRetries: 1}},
		func() string { return "localhost:1" }, h.log)
	d.killGrace = 500 * time.Millisecond
	h.state.SetExecutor(d)
	if d.Ready() == nil {
		t.Error("ready before it started")
	}
	ctx, cancel := context.WithCancel(h.ctx)
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx) }()
	eventually(t, "readiness", 10*time.Second, func() bool { return d.Ready() == nil })

	key := h.run("rrun", longFirstAttempt, taskOpts{})
	h.wait(key, "RUNNING", 20*time.Second, func(a *store.Action) bool { return a.Phase == store.PhaseRunning })
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
	if a, _ := h.st.Actions.Get(h.ctx, key); a.Phase != store.PhaseQueued || a.Attempts != 2 {
		t.Errorf("after Run: %s attempt %d", phaseOf(a), a.Attempts)
	}
}
