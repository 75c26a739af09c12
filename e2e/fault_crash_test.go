package e2e

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"fmgr.dev/internal/failpoint"
	"fmgr.dev/internal/testkit"
)

// The crash matrix: for each failpoint (internal/failpoint) on each database,
// a manager built with -tags failpoints runs fan-out runs of real SDK tasks
// and kills itself with SIGKILL at that point, with work in flight; it is
// restarted (normal build, nothing armed) and must then finish everything it
// accepted. Checked per cell:
//   - every run CreateRun answered ends SUCCEEDED with its exact output (the
//     aborted one ABORTED), and ListRuns still lists it (nothing lost);
//   - a run committed but never answered (the create-run point) ends
//     SUCCEEDED as well;
//   - no two executions of one action held its lock file at once (overlap);
//   - an action whose attempt had written outputs.pb is not executed again
//     (rerun).
//
// `make test` runs every point on SQLite and two on PostgreSQL with small
// runs; FM_RELIABILITY=full runs every point on both databases with larger
// runs. Run it with -v to see the table.

// crashCase arms one failpoint on its at-th hit. abort adds a run that is
// aborted while its leaves run (the abort cascade needs one).
type crashCase struct {
	point string
	at    int
	abort bool
	// inShort: part of the short matrix on PostgreSQL (every case runs on
	// SQLite).
	inShort bool
}

var crashCases = []crashCase{
	{point: failpoint.CreateRunCommitted, at: 3},
	{point: failpoint.AttemptClaimed, at: 4},
	{point: failpoint.ProcessStarted, at: 4},
	{point: failpoint.ProcessExited, at: 3, inShort: true},
	{point: failpoint.AbortCascade, at: 2, abort: true, inShort: true},
	{point: failpoint.ChildEnqueued, at: 3},
}

// reliabilityFull says whether the long variants of the fault suites run.
func reliabilityFull() bool { return os.Getenv("FM_RELIABILITY") == "full" }

// crashRow is one cell of the table the matrix prints.
type crashRow struct {
	point, db                                  string
	fired                                      bool
	accepted, terminal, lost, overlaps, reruns int
	unanswered                                 int // committed by CreateRun, never answered
	failed                                     bool
}

func TestFaultCrashMatrix(t *testing.T) {
	if len(crashCases) != len(failpoint.Names) {
		t.Fatalf("the matrix covers %d failpoints, the manager has %d", len(crashCases), len(failpoint.Names))
	}
	runs, children := 3, 2
	if reliabilityFull() {
		runs, children = 5, 3
	}
	var rows []crashRow
	for _, b := range backends {
		for _, c := range crashCases {
			if b.name != "sqlite" && !c.inShort && !reliabilityFull() {
				continue
			}
			t.Run(c.point+"/"+b.name, func(t *testing.T) {
				row := crashRow{point: c.point, db: b.name}
				defer func() { rows = append(rows, row) }() // also when the cell stops early
				crashCell(t, b, c, runs, children, &row)
			})
		}
	}
	var table strings.Builder
	fmt.Fprintf(&table, "\n%-22s %-9s %5s %8s %8s %5s %8s %6s %10s %6s\n",
		"failpoint", "database", "fired", "accepted", "terminal", "lost", "overlaps", "reruns", "unanswered", "result")
	for _, r := range rows {
		result := "ok"
		if r.failed {
			result = "FAIL"
		}
		fmt.Fprintf(&table, "%-22s %-9s %5v %8d %8d %5d %8d %6d %10d %6s\n",
			r.point, r.db, r.fired, r.accepted, r.terminal, r.lost, r.overlaps, r.reruns, r.unanswered, result)
	}
	t.Log(table.String())
}

// crashCell runs one failpoint on one database and fills in its figures; a
// check that does not hold fails the subtest after the figures are counted.
func crashCell(t *testing.T, b backend, c crashCase, runs, children int, row *crashRow) {
	defer func() { row.failed = t.Failed() }()
	ctx := scenarioContext(t, 20*time.Minute)
	state := testkit.TaskDir(t)
	mark := filepath.Join(t.TempDir(), "failpoint-fired")
	m := startFailpointManager(t, b.dsn(t), append(sdkManagerEnv(t),
		fmt.Sprintf("FLYTE_MANAGER_FAILPOINT=%s@%d", c.point, c.at),
		"FLYTE_MANAGER_FAILPOINT_MARK="+mark)...)
	reapFaultTasksOnCleanup(t, state)

	args := []string{"submit", sdkEndpoint(m), state, strconv.Itoa(runs), strconv.Itoa(children), "1", ""}
	if c.abort {
		args = append(args, "abort")
	}
	var sub struct {
		Accepted []string
		Victim   string
		Errors   []string
	}
	driver(t, ctx, &sub, "../fault/drive_fault.py", args...)
	t.Logf("accepted %v, victim %q, submit errors %v", sub.Accepted, sub.Victim, sub.Errors)
	row.accepted = len(sub.Accepted)

	// The manager must die at the armed point: never at all is a failure,
	// and so is any other death (it would not have written the mark).
	if msg := testkit.Poll(5*time.Minute, 200*time.Millisecond, func() string {
		if _, err := os.Stat(mark); err != nil {
			return "failpoint " + c.point + " never fired"
		}
		return ""
	}); msg != "" {
		t.Fatal(msg)
	}
	row.fired = true
	m.Kill() // reaps the process the failpoint killed
	fired, _ := os.ReadFile(mark)
	t.Logf("%s", strings.TrimSpace(string(fired)))
	if row.accepted == 0 {
		t.Fatalf("no run was accepted before the crash: the cell tests nothing (submit errors: %v)", sub.Errors)
	}
	m.RestartAs(managerBin, sdkManagerEnv(t)...)

	var res struct {
		Runs map[string]struct {
			Phase  string
			Output any
		}
		Listed []string
	}
	driver(t, ctx, &res, "../fault/drive_fault.py", append([]string{"wait", sdkEndpoint(m)}, sub.Accepted...)...)

	want := float64(children * (children - 1) / 2)
	var problems []string
	for _, name := range sub.Accepted {
		r := res.Runs[name]
		if slices.Contains([]string{"SUCCEEDED", "FAILED", "ABORTED", "TIMED_OUT"}, r.Phase) {
			row.terminal++
		}
		if !slices.Contains(res.Listed, name) {
			row.lost++
			problems = append(problems, fmt.Sprintf("accepted run %s is not listed after the restart", name))
		}
		switch {
		case name == sub.Victim:
			if r.Phase != "ABORTED" {
				problems = append(problems, fmt.Sprintf("aborted run %s ended %s, want ABORTED", name, r.Phase))
			}
		case r.Phase != "SUCCEEDED" || r.Output != want:
			problems = append(problems, fmt.Sprintf("run %s ended %s with output %v, want SUCCEEDED with %v", name, r.Phase, r.Output, want))
		}
	}
	for name, r := range res.Runs {
		if slices.Contains(sub.Accepted, name) {
			continue
		}
		// The database is this cell's own: any other run is one CreateRun
		// committed without answering.
		row.unanswered++
		if r.Phase != "SUCCEEDED" {
			problems = append(problems, fmt.Sprintf("run %s, committed but unanswered, ended %s, want SUCCEEDED", name, r.Phase))
		}
	}

	st := readFaultState(t, state, m.Home)
	for key, n := range st.overlaps {
		row.overlaps += n
		problems = append(problems, fmt.Sprintf("action %s: %d execution(s) started while another still held its lock", key, n))
	}
	for key, execs := range st.execs {
		done := st.outputs[key]
		if len(done) == 0 {
			if !strings.HasPrefix(key, sub.Victim+".") || sub.Victim == "" {
				problems = append(problems, fmt.Sprintf("action %s ran but no outputs.pb of it was found under %s: the rerun check would be blind", key, m.Home))
			}
			continue
		}
		first := slices.Min(done)
		for _, e := range execs {
			if e.attempt > first {
				row.reruns++
				problems = append(problems, fmt.Sprintf("action %s: attempt %d wrote outputs.pb, yet attempt %d executed again (pid %d)", key, first, e.attempt, e.pid))
			}
		}
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// failpointBinary builds the manager with -tags failpoints once per test
// binary, next to the harness's own build.
var failpointBinary = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(filepath.Dir(managerBin), "flyte-manager-failpoints")
	build := exec.Command("go", "build", "-tags", "failpoints", "-o", bin, "fmgr.dev/manager")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building flyte-manager with -tags failpoints: %v\n%s", err, out)
	}
	return bin, nil
})

// startFailpointManager is startManager with the failpoint build; the test
// restarts the normal build with RestartAs.
func startFailpointManager(t *testing.T, dsn string, env ...string) *manager {
	t.Helper()
	bin, err := failpointBinary()
	if err != nil {
		t.Fatal(err)
	}
	return startManagerAs(t, bin, dsn, env...)
}

// execution is one line a task of wf_fault.py appended to its .exec file.
type execution struct {
	pid     int
	attempt int
}

// faultState is what the tasks and the storage tell after a fault test,
// keyed by "<run>.<action>".
type faultState struct {
	execs    map[string][]execution
	overlaps map[string]int
	outputs  map[string][]int // attempts whose outputs.pb exists
}

func readFaultState(t *testing.T, stateDir, home string) faultState {
	t.Helper()
	s := faultState{execs: map[string][]execution{}, overlaps: map[string]int{}, outputs: map[string][]int{}}
	entries, err := os.ReadDir(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		var key string
		switch {
		case strings.HasSuffix(name, ".exec"):
			key = strings.TrimSuffix(name, ".exec")
		case strings.HasSuffix(name, ".overlap"):
			key = strings.TrimSuffix(name, ".overlap")
		default:
			continue
		}
		data, err := os.ReadFile(filepath.Join(stateDir, name))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if strings.HasSuffix(name, ".overlap") {
			s.overlaps[key] += len(lines)
			continue
		}
		for _, line := range lines {
			f := strings.Fields(line)
			if len(f) < 2 {
				t.Fatalf("%s: malformed line %q", name, line)
			}
			pid, _ := strconv.Atoi(f[0])
			attempt, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatalf("%s: attempt %q is not a number", name, f[1])
			}
			// FLYTE_ATTEMPT_NUMBER counts from 0, attempt directories from 1.
			s.execs[key] = append(s.execs[key], execution{pid: pid, attempt: attempt + 1})
		}
	}
	// Attempt outputs live at .../<run>/<action>/<attempt>/outputs.pb in the
	// manager's file storage.
	err = filepath.WalkDir(filepath.Join(home, "blobs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "outputs.pb" {
			return err
		}
		attemptDir := filepath.Dir(path)
		actionDir := filepath.Dir(attemptDir)
		attempt, err := strconv.Atoi(filepath.Base(attemptDir))
		if err != nil {
			return nil // not an attempt's directory
		}
		key := filepath.Base(filepath.Dir(actionDir)) + "." + filepath.Base(actionDir)
		s.outputs[key] = append(s.outputs[key], attempt)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// reapFaultTasksOnCleanup kills, when the test ends, any task process that
// wf_fault.py recorded in stateDir and that still runs (a failed test can
// leave the never-released leaves behind). Only processes of the recorded
// runs are touched.
func reapFaultTasksOnCleanup(t *testing.T, stateDir string) {
	t.Cleanup(func() {
		entries, _ := os.ReadDir(stateDir)
		for _, e := range entries {
			key, ok := strings.CutSuffix(e.Name(), ".exec")
			if !ok {
				continue
			}
			run, _, _ := strings.Cut(key, ".")
			data, _ := os.ReadFile(filepath.Join(stateDir, e.Name()))
			var pids []int
			for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
				if f := strings.Fields(line); len(f) > 0 {
					if pid, err := strconv.Atoi(f[0]); err == nil {
						pids = append(pids, pid)
					}
				}
			}
			for _, p := range livePIDs(pids, "RUN_NAME="+run) {
				t.Logf("cleanup: killing leftover task process %s", p)
				_ = syscall.Kill(p.PID, syscall.SIGKILL)
			}
		}
	})
}
