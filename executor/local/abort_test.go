package local

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
	"fmgr.dev/internal/testkit"
)

func TestAbort(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		d := h.driver(func(c *config.LocalExecutor) { c.MaxParallelism = 1 })
		// The root runs with a grandchild in its group and one in its own
		// session; c1 takes the root's slot (a parent does not count); c2
		// finds none and waits.
		root := h.run("rabort", `sleep 60 & echo $! > "$SHARED/gc1"; setsid sleep 60 & echo $! > "$SHARED/gc2"; echo $$ > "$SHARED/root"; wait`, taskOpts{})
		h.wait(root, "RUNNING", 20*time.Second, func(a *store.Action) bool { return a.Phase == phase.Running })
		testkit.Eventually(t, "the root's pids", 10*time.Second, func() bool {
			return atoi(h.readShared("root")) > 0 && atoi(h.readShared("gc1")) > 0 && atoi(h.readShared("gc2")) > 0
		})
		c1 := h.child(root, "c1", `echo $$ > "$SHARED/c1"; exec sleep 60`, taskOpts{})
		h.wait(c1, "RUNNING", 20*time.Second, func(a *store.Action) bool { return a.Phase == phase.Running })
		c2 := h.child(root, "c2", `touch "$SHARED/c2-ran"; `+succeed, taskOpts{})
		h.wait(c2, "WAITING_FOR_RESOURCES", 20*time.Second, func(a *store.Action) bool { return a.Phase == phase.WaitingForResources })
		testkit.Eventually(t, "c1's pid", 10*time.Second, func() bool { return atoi(h.readShared("c1")) > 0 })

		if err := h.state.Abort(h.ctx, root, "enough", "alice"); err != nil {
			t.Fatal(err)
		}
		for _, k := range []store.ActionKey{root, c1, c2} {
			a := h.terminal(k, phase.Aborted, 20*time.Second)
			ai := &workflow.AbortInfo{}
			if err := proto.Unmarshal(a.AbortInfo, ai); err != nil || ai.GetReason() != "enough" {
				t.Errorf("%s abort info %v (%v)", k.Name, ai, err)
			}
		}
		for _, f := range []string{"root", "gc1", "gc2", "c1"} {
			pid := atoi(h.readShared(f))
			testkit.Eventually(t, f+" to die", 10*time.Second, func() bool { return !alive(pid) })
		}
		if _, err := os.Stat(h.sharedFile("c2-ran")); err == nil {
			t.Error("the queued sibling ran")
		}
		if dir, _ := attemptDir(h.workDir, c2, 1); dirExists(dir) {
			t.Error("the queued sibling got an attempt directory")
		}
		if got := h.phases(c2, 1); !slices.Equal(got, []string{"QUEUED", "WAITING_FOR_RESOURCES", "ABORTED"}) {
			t.Errorf("c2 phases %v", got)
		}
		if got := h.phases(root, 1); !slices.Equal(got, []string{"QUEUED", "INITIALIZING", "RUNNING", "ABORTED"}) {
			t.Errorf("root phases %v", got)
		}
		// Nothing aborted runs again, not even after two more resync scans.
		scanned := d.scans.Load()
		testkit.Eventually(t, "two resync scans", 30*time.Second, func() bool { return d.scans.Load() >= scanned+2 })
		for _, k := range []store.ActionKey{root, c1, c2} {
			if a, _ := h.st.Actions.Get(h.ctx, k); a.Phase != phase.Aborted || a.Attempts != 1 {
				t.Errorf("%s: %s, %d attempts", k.Name, a.Phase.String(), a.Attempts)
			}
		}
	})
}

// A child enqueued just before its parent ended (or was aborted without it)
// never runs: the driver aborts it.
func TestChildOfAnEndedParentIsAborted(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		root := h.run("rended", succeed, taskOpts{})
		c1 := h.child(root, "c1", `touch "$SHARED/c1-ran"; `+succeed, taskOpts{})
		// The parent ends behind the executor's back.
		if _, err := h.st.Actions.Update(h.ctx, root, store.AnyVersion, store.Update{Phase: phase.Failed}); err != nil {
			t.Fatal(err)
		}
		h.driver()
		a := h.terminal(c1, phase.Aborted, 20*time.Second)
		ai := &workflow.AbortInfo{}
		_ = proto.Unmarshal(a.AbortInfo, ai)
		if !strings.Contains(ai.GetReason(), "parent action a0 ended FAILED") {
			t.Errorf("abort reason %q", ai.GetReason())
		}
		if _, err := os.Stat(h.sharedFile("c1-ran")); err == nil {
			t.Error("the child ran")
		}
	})
}

// max_action_concurrency bounds the attempts of a run that do work: with 1,
// the children of a fanning-out root run one at a time.
func TestMaxActionConcurrency(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		h.driver() // 4 global slots
		root := h.run("rconc", `i=0; while [ $i -lt 600 ] && [ ! -e "$SHARED/go" ]; do sleep 0.05; i=$((i+1)); done; `+succeed,
			taskOpts{limit: 1})
		h.wait(root, "RUNNING", 20*time.Second, func(a *store.Action) bool { return a.Phase == phase.Running })
		child := `if ! mkdir "$SHARED/lock" 2>/dev/null; then touch "$SHARED/overlap"; fi
echo "start $7 $(date +%s%N)" >> "$SHARED/trace"; sleep 0.3; echo "end $7 $(date +%s%N)" >> "$SHARED/trace"
rmdir "$SHARED/lock"; ` + succeed
		var kids []store.ActionKey
		for _, n := range []string{"c1", "c2", "c3"} {
			kids = append(kids, h.child(root, n, child, taskOpts{}))
		}
		for _, k := range kids {
			h.terminal(k, phase.Succeeded, 30*time.Second)
		}
		writeFile(t, h.sharedFile("go"), "", 0o644) // the root ends once its children did
		h.terminal(root, phase.Succeeded, 30*time.Second)
		if _, err := os.Stat(h.sharedFile("overlap")); err == nil {
			t.Fatalf("two children ran at once:\n%s", h.readShared("trace"))
		}
		waited := 0
		for _, k := range kids {
			if slices.Contains(h.phases(k, 1), "WAITING_FOR_RESOURCES") {
				waited++
			}
		}
		if waited < 2 {
			t.Errorf("%d children waited for a slot, want at least 2", waited)
		}
	})
}

// A wait for a slot shorter than the driver's grace is not recorded: the
// second child, which waits while the first runs, goes from QUEUED to
// INITIALIZING; the recorded wait (TestAbort, TestMaxActionConcurrency)
// is one that outlasts the grace.
func TestShortWaitIsNotRecorded(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		d := h.driverWith(func(d *Driver) { d.waitGrace = time.Hour }, func(c *config.LocalExecutor) { c.MaxParallelism = 1 })
		root := h.run("rshort", `while [ ! -e "$SHARED/go" ]; do sleep 0.05; done; `+succeed, taskOpts{})
		h.wait(root, "RUNNING", 20*time.Second, func(a *store.Action) bool { return a.Phase == phase.Running })
		c1 := h.child(root, "c1", `while [ ! -e "$SHARED/c1-go" ]; do sleep 0.05; done; `+succeed, taskOpts{})
		h.wait(c1, "RUNNING", 20*time.Second, func(a *store.Action) bool { return a.Phase == phase.Running })
		c2 := h.child(root, "c2", succeed, taskOpts{})
		testkit.Eventually(t, "c2 to find no slot", 20*time.Second, func() bool { return d.slots.Waits(c2) })
		writeFile(t, h.sharedFile("c1-go"), "", 0o644)
		for _, k := range []store.ActionKey{c1, c2} {
			h.terminal(k, phase.Succeeded, 30*time.Second)
		}
		writeFile(t, h.sharedFile("go"), "", 0o644)
		h.terminal(root, phase.Succeeded, 30*time.Second)
		if got := h.phases(c2, 1); !slices.Equal(got, []string{"QUEUED", "INITIALIZING", "RUNNING", "SUCCEEDED"}) {
			t.Errorf("c2 phases %v, want no WAITING_FOR_RESOURCES", got)
		}
	})
}

func dirExists(dir string) bool {
	_, err := os.Stat(dir)
	return !errors.Is(err, os.ErrNotExist)
}
