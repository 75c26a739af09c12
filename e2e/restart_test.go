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
)

// Scenario 7: the manager dies (SIGKILL) with runs in flight and comes back
// on the same home and database. Every run reaches a terminal phase, none is
// lost, and no two attempts of one action ever ran at the same time.
func TestManagerRestart(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := scenarioContext(t, 10*time.Minute)
			m := startSDKManager(t, b.dsn(t))
			logDir := t.TempDir()

			var submitted struct{ Runs map[string]string }
			driver(t, ctx, &submitted, "drive_restart.py", "submit", sdkEndpoint(m), logDir, "8")
			var names []string
			for _, name := range submitted.Runs {
				names = append(names, name)
			}
			sort.Strings(names)
			fanout := submitted.Runs["fanout"]
			t.Cleanup(func() {
				// Whatever the manager did, no attempt process outlives the test.
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

			// In flight: every root has started, and so has a child of the fan-out.
			if msg := eventually(4*time.Minute, 200*time.Millisecond, func() string {
				for _, name := range names {
					evs := readAttemptLog(t, logDir, name)
					if !slices.ContainsFunc(evs, func(e attemptEvent) bool { return e.Kind == "start" && e.Action == "a0" }) {
						return "run " + name + " has not started"
					}
				}
				if !slices.ContainsFunc(readAttemptLog(t, logDir, fanout), func(e attemptEvent) bool {
					return e.Kind == "start" && e.Action != "a0"
				}) {
					return "no child of fan-out run " + fanout + " has started"
				}
				return ""
			}); msg != "" {
				t.Fatalf("runs never got in flight: %s", msg)
			}

			m.Kill()
			t.Logf("killed the manager with %d runs in flight", len(names))
			m.Restart(sdkManagerEnv(t)...)

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
				case !slices.Contains([]string{"SUCCEEDED", "FAILED", "ABORTED", "TIMED_OUT"}, r.Phase):
					t.Errorf("run %s (%s) is %s after the restart, want a terminal phase", name, key, r.Phase)
				default:
					t.Logf("run %s (%s): %s, output %v", name, key, r.Phase, r.Output)
				}
				if !slices.Contains(res.Listed, name) {
					t.Errorf("ListRuns after the restart does not list run %s (%s)", name, key)
				}
			}
			for _, name := range names {
				checkNoOverlap(t, name, readAttemptLog(t, logDir, name))
			}
		})
	}
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
