package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"fmgr.dev/internal/testkit"
)

// Scenario 7: the manager dies (SIGKILL) while tasks run and comes back on
// the same home and database. The tasks hold on a release file until after
// the restart, so the kill always hits running work. Every run then
// succeeds with exactly its outputs, none is lost, and no two attempts of one
// action ever ran at the same time.
func TestManagerRestart(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			// Room for all seven tasks at once: they hold until released,
			// so a smaller limit would leave children queued behind roots.
			m := startSDKManager(t, b.dsn(t), "FLYTE_MANAGER_EXECUTOR_LOCAL_MAXPARALLELISM=16")
			holdRuns(t, m, func(map[string]string) {
				t.Log("killing the manager with every run in flight")
				m.Kill()
				m.Restart()
			})
		})
	}
}

// holdRuns is the restart scenario on m: it submits the runs of
// drive_restart.py, waits until all seven tasks run and hold, calls during
// with the runs by key (slow1..3, fanout; during restarts the manager, or
// looks at the runs in flight, and leaves m serving), releases the tasks
// and checks every run. It returns the runs by key.
func holdRuns(t *testing.T, m *manager, during func(runs map[string]string)) map[string]string {
	t.Helper()
	ctx := scenarioContext(t, 10*time.Minute)
	logDir := testkit.TaskDir(t)
	release := filepath.Join(testkit.TaskDir(t), "release")

	var submitted struct{ Runs map[string]string }
	driver(t, ctx, &submitted, "drive_restart.py", "submit", sdkEndpoint(m), logDir, release)
	// What each run returns (drive_restart.py): slow<i> → i, the
	// fan-out → 0+1+2.
	wantOutput := map[string]string{"slow1": "1", "slow2": "2", "slow3": "3", "fanout": "3"}
	var names []string
	for key, name := range submitted.Runs {
		if _, ok := wantOutput[key]; !ok {
			t.Fatalf("the driver submitted run %s as %q, which the test does not know", name, key)
		}
		names = append(names, name)
	}
	if len(names) != len(wantOutput) {
		t.Fatalf("the driver submitted %v, want the runs %v", submitted.Runs, wantOutput)
	}
	sort.Strings(names)
	fanout := submitted.Runs["fanout"]
	t.Cleanup(func() {
		// Whatever the manager did, no attempt process outlives the test.
		_ = os.WriteFile(release, nil, 0o644)
		for _, name := range names {
			var pids []int
			for _, e := range readAttemptLog(t, logDir, name) {
				pids = append(pids, e.PID)
			}
			for _, p := range livePIDs(pids, "RUN_NAME="+name) {
				t.Logf("cleanup: killing leftover task process %s", p)
				_ = syscall.Kill(p.PID, syscall.SIGKILL)
			}
		}
	})

	// In flight: every root and all three children of the fan-out
	// are running their task code (they hold until released).
	if msg := testkit.Poll(5*time.Minute, 200*time.Millisecond, func() string {
		for _, name := range names {
			evs := readAttemptLog(t, logDir, name)
			if !slices.ContainsFunc(evs, func(e attemptEvent) bool { return e.Kind == "start" && e.Action == "a0" }) {
				return "run " + name + " has not started"
			}
		}
		children := map[string]bool{}
		for _, e := range readAttemptLog(t, logDir, fanout) {
			if e.Kind == "start" && e.Action != "a0" {
				children[e.Action] = true
			}
		}
		if len(children) < 3 {
			return fmt.Sprintf("%d of the 3 children of fan-out run %s have started", len(children), fanout)
		}
		return ""
	}); msg != "" {
		t.Fatalf("runs never got in flight: %s", msg)
	}
	for _, name := range names {
		for _, e := range readAttemptLog(t, logDir, name) {
			if e.Kind == "end" {
				t.Fatalf("run %s: action %s ended before the release: %+v", name, e.Action, e)
			}
		}
	}

	during(submitted.Runs)
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}

	var res struct {
		Runs map[string]struct {
			Phase  string
			Output any
		}
		Listed []string
	}
	driver(t, ctx, &res, "drive_restart.py", append([]string{"wait", sdkEndpoint(m)}, names...)...)

	for key, name := range submitted.Runs {
		r, ok := res.Runs[name]
		switch {
		case !ok:
			t.Errorf("run %s (%s) was not reported", name, key)
		case r.Phase != "SUCCEEDED":
			t.Errorf("run %s (%s) is %s after the restart, want SUCCEEDED", name, key, r.Phase)
		default:
			checkJSON(t, fmt.Sprintf("output of run %s (%s)", name, key), r.Output, wantOutput[key])
		}
		if !slices.Contains(res.Listed, name) {
			t.Errorf("ListRuns after the restart does not list run %s (%s)", name, key)
		}
	}
	for _, name := range names {
		evs := readAttemptLog(t, logDir, name)
		checkNoOverlap(t, name, evs)
		if !slices.ContainsFunc(evs, func(e attemptEvent) bool { return e.Kind == "end" && e.Action == "a0" }) {
			t.Errorf("run %s succeeded, but no attempt of its root recorded its end", name)
		}
	}
	return submitted.Runs
}

// attemptEvent is one line a task of wf_restart.py wrote.
type attemptEvent struct {
	Kind, Action, Attempt string
	PID                   int
	At                    float64
	Concurrent            string // pids of other live attempts of the action at start
}

func readAttemptLog(t *testing.T, dir, run string) []attemptEvent {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, run+".log"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var evs []attemptEvent
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		pid, _ := strconv.Atoi(f[3])
		at, _ := strconv.ParseFloat(f[4], 64)
		ev := attemptEvent{Kind: f[0], Action: f[1], Attempt: f[2], PID: pid, At: at}
		if len(f) > 5 {
			ev.Concurrent = strings.TrimPrefix(f[5], "concurrent=")
		}
		evs = append(evs, ev)
	}
	return evs
}

// checkNoOverlap fails when two attempts of one action of the run ran at the
// same time: one found the other's process alive when it started, or their
// recorded start..end intervals intersect.
func checkNoOverlap(t *testing.T, run string, evs []attemptEvent) {
	t.Helper()
	type interval struct {
		pid        int
		attempt    string
		start, end float64 // end 0: never ended (killed)
	}
	byAction := map[string][]*interval{}
	for _, e := range evs {
		if e.Concurrent != "" {
			t.Errorf("run %s: action %s attempt %s (pid %d) started while earlier attempt(s) with pid %s still ran", run, e.Action, e.Attempt, e.PID, e.Concurrent)
		}
		switch e.Kind {
		case "start":
			byAction[e.Action] = append(byAction[e.Action], &interval{pid: e.PID, attempt: e.Attempt, start: e.At})
		case "end":
			for _, iv := range byAction[e.Action] {
				if iv.pid == e.PID && iv.end == 0 {
					iv.end = e.At
				}
			}
		}
	}
	for action, ivs := range byAction {
		for i, a := range ivs {
			for _, b := range ivs[i+1:] {
				if a.end != 0 && b.end != 0 && a.start < b.end && b.start < a.end {
					t.Errorf("run %s: action %s ran twice at once: attempt %s (pid %d) %.3f..%.3f and attempt %s (pid %d) %.3f..%.3f",
						run, action, a.attempt, a.pid, a.start, a.end, b.attempt, b.pid, b.start, b.end)
				}
			}
		}
		t.Logf("run %s action %s: %d attempt process(es)%s", run, action, len(ivs), describeIntervals(len(ivs), func(i int) string {
			iv := ivs[i]
			if iv.end == 0 {
				return fmt.Sprintf("attempt %s pid %d killed", iv.attempt, iv.pid)
			}
			return fmt.Sprintf("attempt %s pid %d %.1fs", iv.attempt, iv.pid, iv.end-iv.start)
		}))
	}
}

func describeIntervals(n int, f func(int) string) string {
	var parts []string
	for i := range n {
		parts = append(parts, f(i))
	}
	if len(parts) == 0 {
		return ""
	}
	return ": " + strings.Join(parts, ", ")
}
