package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"fmgr.dev/internal/testkit"
)

// fanoutWidth is how many children the fan-out scenario starts, once per backend.
const fanoutWidth = 100

// sdkScenarios are the scenarios that share one manager: TestSDK runs them
// on each backend with the local executor, TestSDKKubernetes with the
// kubernetes executor. One list, so both executors face the same suite.
var sdkScenarios = []struct {
	name string
	run  func(*testing.T, *manager)
}{
	{"values", testValues},
	{"tree", testTree},
	{"retries", testRetries},
	{"timeout", testTimeout},
	{"abort", testAbort},
	{"cli", testCLI},
	{"quickstart", testQuickStart},
	{"wait", testWaitReadsOwnPhase},
	{"history", testHistory},
	{"cache", testCacheRepeat},
	{"cache-serial", testCacheSerialized},
	{"cache-scope", testCacheScope},
	{"secrets", testSecrets},
	{"rerun", testRerun},
	{"containers", testContainers},
	{"recover", testRecover},
	{"files", testFiles},
	{"resources", testResourcesWait},
	{"queues", testQueues},
	{"loglinks", testLogLinks},
	{"conditions", testConditions},
	{"s3scope", testS3Scope},
}

// runSDKScenarios adds every sdkScenario against m to t as a parallel
// subtest (at most -parallel run at a time, GOMAXPROCS by default); each
// looks only at its own runs. They start once t's function has returned.
func runSDKScenarios(t *testing.T, m *manager) {
	for _, s := range sdkScenarios {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			s.run(t, m)
		})
	}
}

// TestSDK runs, for each backend, one manager and the real flyte SDK through
// every scenario that can share it.
func TestSDK(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			runSDKScenarios(t, startSDKManager(t, b.dsn(t)))
		})
	}
}

// Shapes of what the drivers in testdata/sdk report.
type (
	actionInfo struct {
		Name, Parent, Phase, Task string
	}
	transition struct {
		Phase      string
		Start, End *float64
	}
	attemptInfo struct {
		Attempt     int
		Phase       string
		Error       string
		Start, End  *float64
		Transitions []transition
	}
)

func scenarioContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// checkJSON compares got, as JSON, with the JSON text want.
func checkJSON(t *testing.T, what string, got any, want string) {
	t.Helper()
	raw, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad expectation %q: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s = %s, want %s", what, raw, want)
	}
}

// Scenario 1: values of every kind make the trip client → manager → task →
// manager → client unchanged (inputs) or as the task derived them (outputs).
func testValues(t *testing.T, m *manager) {
	ctx := scenarioContext(t, 8*time.Minute)
	var res struct {
		Phases          map[string]string
		Errors          map[string]string
		AddOne          []any          `json:"add_one"`
		TransformInputs map[string]any `json:"transform_inputs"`
		Transform       []any
		File            struct{ Path, Text string }
	}
	driverWith(t, ctx, m.ClientEnv(), &res, "drive_values.py", sdkEndpoint(m), testkit.TaskDir(t))

	if len(res.Errors) > 0 {
		t.Fatalf("runs did not succeed: phases %v, errors %v", res.Phases, res.Errors)
	}
	checkJSON(t, "phases", res.Phases, `{"add_one":"SUCCEEDED","transform":"SUCCEEDED","write_file":"SUCCEEDED"}`)
	checkJSON(t, "add_one(x=41) outputs", res.AddOne, `[42]`)
	checkJSON(t, "transform inputs read back", res.TransformInputs,
		`{"n":7,"s":"flyte","items":[3,1,2],"mapping":{"a":1,"b":2},"p":{"x":1,"y":2.5,"label":"p","tags":["t"]}}`)
	checkJSON(t, "transform outputs", res.Transform,
		`[42,"FLYTE!",[1,2,3,6],{"a":1,"b":2,"total":3},{"x":2,"y":5.0,"label":"P","tags":["t","moved"]}]`)
	// The manager's storage is a directory under its home (the default the
	// harness starts it with), reached through its S3 endpoint's bucket or
	// by path, or its S3 bucket: the task wrote the file there, not beside
	// itself.
	switch {
	case m.S3 != nil:
		if !strings.HasPrefix(res.File.Path, "s3://"+m.S3.Bucket+"/") {
			t.Errorf("the task's file is at %s, want it in the manager's bucket %s", res.File.Path, m.S3.Bucket)
		}
	case m.S3Locations():
		if !strings.HasPrefix(res.File.Path, "s3://flyte/") {
			t.Errorf("the task's file is at %s, want it in the bucket of the manager's S3 endpoint", res.File.Path)
		}
	case !strings.HasPrefix(res.File.Path, m.Home+"/") && !strings.HasPrefix(res.File.Path, "file://"+m.Home+"/"):
		t.Errorf("the task's file is at %s, want it in the manager's storage under %s", res.File.Path, m.Home)
	}
	if res.File.Text != "hello from a task\n" {
		t.Errorf("file written by the task (%s) reads back as %q, want %q", res.File.Path, res.File.Text, "hello from a task\n")
	}
}

// Scenario 2: tasks calling tasks.
func testTree(t *testing.T, m *manager) {
	ctx := scenarioContext(t, 12*time.Minute)
	type treeRun struct {
		Run, Phase, Error string
		Output            any
		Actions           []actionInfo
	}
	var res struct{ Fanout, Chain, Catch treeRun }
	driverWith(t, ctx, m.ClientEnv(), &res, "drive_tree.py", sdkEndpoint(m), fmt.Sprint(fanoutWidth))

	byName := func(r treeRun) map[string]actionInfo {
		idx := map[string]actionInfo{}
		for _, a := range r.Actions {
			if _, dup := idx[a.Name]; dup {
				t.Errorf("run %s lists action %s twice", r.Run, a.Name)
			}
			idx[a.Name] = a
		}
		return idx
	}
	checkRoot := func(r treeRun, acts map[string]actionInfo) {
		root, ok := acts["a0"]
		switch {
		case !ok:
			t.Errorf("run %s has no root action a0: %+v", r.Run, r.Actions)
		case root.Parent != "":
			t.Errorf("run %s: root a0 has parent %q", r.Run, root.Parent)
		case root.Phase != "SUCCEEDED":
			t.Errorf("run %s: root a0 is %s", r.Run, root.Phase)
		}
	}

	t.Run("fanout", func(t *testing.T) {
		r := res.Fanout
		want := 0
		for i := range fanoutWidth {
			want += i * i
		}
		if r.Phase != "SUCCEEDED" {
			t.Fatalf("fan-out run %s is %s: %s", r.Run, r.Phase, r.Error)
		}
		checkJSON(t, "fan-out sum of squares", r.Output, fmt.Sprint(want))
		acts := byName(r)
		checkRoot(r, acts)
		if len(acts) != fanoutWidth+1 {
			t.Errorf("fan-out run %s has %d actions, want %d (a0 and %d children)", r.Run, len(acts), fanoutWidth+1, fanoutWidth)
		}
		for _, a := range r.Actions {
			if a.Name == "a0" {
				continue
			}
			if a.Parent != "a0" || a.Phase != "SUCCEEDED" || a.Task != "e2e_tree.square" {
				t.Errorf("fan-out child %+v: want parent a0, phase SUCCEEDED, task e2e_tree.square", a)
			}
		}
	})

	t.Run("chain", func(t *testing.T) {
		r := res.Chain
		if r.Phase != "SUCCEEDED" {
			t.Fatalf("chain run %s is %s: %s", r.Run, r.Phase, r.Error)
		}
		checkJSON(t, "chain output", r.Output, `"parent(child(grandchild(3)))"`)
		acts := byName(r)
		checkRoot(r, acts)
		if len(acts) != 3 {
			t.Fatalf("chain run %s has %d actions, want 3: %+v", r.Run, len(acts), r.Actions)
		}
		var child, grandchild actionInfo
		for _, a := range r.Actions {
			switch a.Task {
			case "e2e_tree.child":
				child = a
			case "e2e_tree.grandchild":
				grandchild = a
			}
		}
		if child.Parent != "a0" || grandchild.Parent == "" || grandchild.Parent != child.Name {
			t.Errorf("chain run %s: want a0 → child → grandchild, got %+v", r.Run, r.Actions)
		}
		for _, a := range r.Actions {
			if a.Phase != "SUCCEEDED" {
				t.Errorf("chain action %+v is not SUCCEEDED", a)
			}
		}
	})

	t.Run("catch", func(t *testing.T) {
		r := res.Catch
		if r.Phase != "SUCCEEDED" {
			t.Fatalf("run %s whose parent catches its child's failure is %s, want SUCCEEDED: %s", r.Run, r.Phase, r.Error)
		}
		out, _ := r.Output.(string)
		if !strings.HasPrefix(out, "caught ") || !strings.Contains(out, "child failure e2e-7f3a") {
			t.Errorf("parent output %q: want the caught child error with its message %q", out, "child failure e2e-7f3a")
		}
		acts := byName(r)
		checkRoot(r, acts)
		if len(acts) != 2 {
			t.Fatalf("catch run %s has %d actions, want 2: %+v", r.Run, len(acts), r.Actions)
		}
		for _, a := range r.Actions {
			if a.Name != "a0" && (a.Phase != "FAILED" || a.Parent != "a0" || a.Task != "e2e_tree.fail") {
				t.Errorf("failing child %+v: want parent a0, phase FAILED, task e2e_tree.fail", a)
			}
		}
	})
}

// phaseOrder ranks phases in the order an attempt can pass through them.
var phaseOrder = map[string]int{
	"QUEUED": 1, "WAITING_FOR_RESOURCES": 2, "INITIALIZING": 3, "RUNNING": 4,
	"SUCCEEDED": 5, "FAILED": 5, "ABORTED": 5, "TIMED_OUT": 5,
}

// checkAttempts checks an action's attempt history: attempts numbered 1..n
// with the given final phases, each with phase transitions that include
// RUNNING (the task ran: the scenario's counter file says so), move forward
// through the lifecycle, and end in the attempt's phase; and attempts that do
// not overlap in time.
func checkAttempts(t *testing.T, run string, atts []attemptInfo, phases ...string) {
	t.Helper()
	if len(atts) != len(phases) {
		t.Errorf("run %s: %d attempts in the action details, want %d: %+v", run, len(atts), len(phases), atts)
		return
	}
	var prevEnd *float64
	for i, a := range atts {
		if a.Attempt != i+1 {
			t.Errorf("run %s: attempt #%d is numbered %d", run, i+1, a.Attempt)
		}
		if a.Phase != phases[i] {
			t.Errorf("run %s: attempt %d is %s, want %s", run, i+1, a.Phase, phases[i])
		}
		var seen []string
		rank := 0
		var last *float64
		for _, tr := range a.Transitions {
			seen = append(seen, tr.Phase)
			r, ok := phaseOrder[tr.Phase]
			if !ok || r < rank {
				t.Errorf("run %s attempt %d: phase transitions out of lifecycle order: %+v", run, i+1, a.Transitions)
				break
			}
			rank = r
			if tr.Start != nil && last != nil && *tr.Start < *last {
				t.Errorf("run %s attempt %d: transition to %s starts before the previous one", run, i+1, tr.Phase)
			}
			last = tr.Start
		}
		if !slices.Contains(seen, "RUNNING") {
			t.Errorf("run %s attempt %d: transitions %v do not include RUNNING", run, i+1, seen)
		}
		if len(seen) == 0 || seen[len(seen)-1] != a.Phase {
			t.Errorf("run %s attempt %d: transitions %v do not end in the attempt's phase %s", run, i+1, seen, a.Phase)
		}
		if prevEnd != nil && a.Start != nil && *a.Start < *prevEnd {
			t.Errorf("run %s: attempt %d starts (%f) before attempt %d ended (%f)", run, i+1, *a.Start, i, *prevEnd)
		}
		prevEnd = a.End
	}
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return len(strings.Split(strings.TrimRight(string(data), "\n"), "\n"))
}

// attemptNumbers is the FLYTE_ATTEMPT_NUMBER each attempt of wf_retry.py
// recorded, in order.
func attemptNumbers(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		_, n, _ := strings.Cut(line, " attempt=")
		out = append(out, n)
	}
	return out
}

// Scenario 3: user retries for recoverable errors, none for NonRecoverableError.
func testRetries(t *testing.T, m *manager) {
	ctx := scenarioContext(t, 8*time.Minute)
	type retryRun struct {
		Run, Phase       string
		StatusAttempts   int `json:"status_attempts"`
		Attempts         []attemptInfo
		Error            string
		Output           any
		FailedActions    []string `json:"failed_actions"`
		SucceededActions []string `json:"succeeded_actions"`
		FirstFailure     *string  `json:"first_failure"`
	}
	var res struct{ Flaky, Doomed, Shaky retryRun }
	flakyDir, doomedDir, shakyDir := testkit.TaskDir(t), testkit.TaskDir(t), testkit.TaskDir(t)
	driver(t, ctx, &res, "drive_retry.py", sdkEndpoint(m), flakyDir, doomedDir, shakyDir)

	t.Run("recoverable", func(t *testing.T) {
		r := res.Flaky
		if n := countLines(t, filepath.Join(flakyDir, "attempts")); n != 3 {
			t.Errorf("flaky (retries=2) ran %d times, want 3", n)
		}
		// The task's environment counts attempts from 0, as the SDK and its
		// examples do (the API and output directories count from 1).
		if got := attemptNumbers(t, filepath.Join(flakyDir, "attempts")); !slices.Equal(got, []string{"0", "1", "2"}) {
			t.Errorf("flaky saw FLYTE_ATTEMPT_NUMBER %q over its attempts, want [0 1 2]", got)
		}
		if r.Phase != "SUCCEEDED" {
			t.Errorf("run %s is %s, want SUCCEEDED on its third attempt (error: %s)", r.Run, r.Phase, r.Error)
		}
		checkJSON(t, "flaky output (its attempt count)", r.Output, `3`)
		if r.StatusAttempts != 3 {
			t.Errorf("run %s: status.attempts = %d, want 3", r.Run, r.StatusAttempts)
		}
		checkAttempts(t, r.Run, r.Attempts, "FAILED", "FAILED", "SUCCEEDED")
		if len(r.FailedActions) != 0 || !slices.Equal(r.SucceededActions, []string{"a0"}) || r.FirstFailure != nil {
			t.Errorf("run %s listed by phase: failed %v, succeeded or aborted %v, first failure %v; want none, [a0], none",
				r.Run, r.FailedActions, r.SucceededActions, r.FirstFailure)
		}
		for i, a := range r.Attempts[:min(2, len(r.Attempts))] {
			if !strings.Contains(a.Error, "flaky failure on attempt") {
				t.Errorf("run %s attempt %d: error %q does not carry the task's error", r.Run, i+1, a.Error)
			}
		}
	})

	// A SYSTEM error the task raises itself is retried within the task's
	// retries (5), beyond the manager's system budget (3).
	t.Run("reported-system", func(t *testing.T) {
		r := res.Shaky
		if n := countLines(t, filepath.Join(shakyDir, "attempts")); n != 5 {
			t.Errorf("shaky (retries=5, four RuntimeSystemErrors) ran %d times, want 5", n)
		}
		if r.Phase != "SUCCEEDED" || r.StatusAttempts != 5 {
			t.Errorf("run %s is %s after %d attempts, want SUCCEEDED on attempt 5 (error: %s)", r.Run, r.Phase, r.StatusAttempts, r.Error)
		}
		checkAttempts(t, r.Run, r.Attempts, "FAILED", "FAILED", "FAILED", "FAILED", "SUCCEEDED")
	})

	t.Run("non-recoverable", func(t *testing.T) {
		r := res.Doomed
		if n := countLines(t, filepath.Join(doomedDir, "attempts")); n != 1 {
			t.Errorf("doomed (NonRecoverableError, retries=3) ran %d times, want 1", n)
		}
		if r.Phase != "FAILED" {
			t.Errorf("run %s is %s, want FAILED", r.Run, r.Phase)
		}
		if r.StatusAttempts != 1 {
			t.Errorf("run %s: status.attempts = %d, want 1", r.Run, r.StatusAttempts)
		}
		checkAttempts(t, r.Run, r.Attempts, "FAILED")
		if !slices.Equal(r.FailedActions, []string{"a0"}) || len(r.SucceededActions) != 0 || r.FirstFailure == nil || *r.FirstFailure != "a0" {
			t.Errorf("run %s listed by phase: failed %v, succeeded or aborted %v, first failure %v; want [a0], none, a0",
				r.Run, r.FailedActions, r.SucceededActions, r.FirstFailure)
		}
		if !strings.Contains(r.Error, "doomed on attempt 1") {
			t.Errorf("run %s: error %q does not carry the task's message", r.Run, r.Error)
		}
	})
}

// Scenario 4: a task that outlives its timeout is stopped and ends TIMED_OUT.
func testTimeout(t *testing.T, m *manager) {
	ctx := scenarioContext(t, 8*time.Minute)
	pidDir := testkit.TaskDir(t)
	marker := fmt.Sprintf("timeout-%d", time.Now().UnixNano())
	reapRecordedOnCleanup(t, pidDir, func() []string { return []string{"FM_E2E_MARKER=" + marker} })
	var res struct {
		Run, Phase     string
		ClientSeconds  float64 `json:"client_seconds"`
		StatusAttempts int     `json:"status_attempts"`
		Attempts       []attemptInfo
		Error          string
	}
	driver(t, ctx, &res, "drive_timeout.py", sdkEndpoint(m), pidDir, marker)

	if res.Phase != "TIMED_OUT" {
		t.Fatalf("run %s of a task with a 2s timeout sleeping 60s is %s, want TIMED_OUT (error: %s)", res.Run, res.Phase, res.Error)
	}
	if res.StatusAttempts != 1 || len(res.Attempts) != 1 {
		t.Errorf("run %s: %d attempts (%d in the history), want 1: retries=0", res.Run, res.StatusAttempts, len(res.Attempts))
	}
	if len(res.Attempts) > 0 {
		a := res.Attempts[len(res.Attempts)-1]
		if a.Phase != "TIMED_OUT" {
			t.Errorf("run %s: last attempt is %s, want TIMED_OUT", res.Run, a.Phase)
		}
		// From the start of RUNNING (else of the attempt) to its end, by the
		// manager's clock: a generous bound, only to catch a timeout that
		// never fired and a task that slept its full 60 s.
		start := a.Start
		for _, tr := range a.Transitions {
			if tr.Phase == "RUNNING" && tr.Start != nil {
				start = tr.Start
			}
		}
		if start != nil && a.End != nil && *a.End-*start >= 45 {
			t.Errorf("run %s: the attempt ran %.1fs after it started, want it stopped well before the task's 60s sleep ended", res.Run, *a.End-*start)
		}
	}
	// The task's process is gone. (The timeout counts from RUNNING, which
	// includes the runtime's start-up, so on a busy machine the process may be
	// stopped before the task recorded its pid: look for the run's marker too.)
	pids := recordedPIDs(t, pidDir)
	if len(pids) > 1 {
		t.Errorf("the task recorded %d pids, want at most 1 (one attempt)", len(pids))
	}
	// 30s: well past the executor's SIGTERM-to-SIGKILL grace, well before
	// the task's own 60s sleep would end it.
	if msg := testkit.Poll(30*time.Second, 500*time.Millisecond, func() string {
		live := append(processesWith("FM_E2E_MARKER", marker), livePIDs(pids, "FM_E2E_MARKER="+marker)...)
		if len(live) > 0 {
			return fmt.Sprintf("the timed-out task's process still runs: %v", live)
		}
		return ""
	}); msg != "" {
		t.Error(msg)
	}
}

// Scenario 5: aborting a run stops every action and every process, for good.
func testAbort(t *testing.T, m *manager) {
	ctx := scenarioContext(t, 8*time.Minute)
	const children = 3
	dir := testkit.TaskDir(t)
	marker := fmt.Sprintf("abort-%d", time.Now().UnixNano())
	var runName string
	reapRecordedOnCleanup(t, dir, func() []string {
		return []string{"FM_E2E_MARKER=" + marker, "RUN_NAME=" + runName}
	})
	type abortReport struct {
		Run, Phase  string
		Actions     []actionInfo
		AbortReason string `json:"abort_reason"`
	}
	// The run's processes: those with its marker or its name in their
	// environment, and those its tasks recorded.
	runProcesses := func(pids []int) []proc {
		var found []proc
		add := func(ps ...proc) {
			for _, p := range ps {
				if !slices.ContainsFunc(found, func(q proc) bool { return q.PID == p.PID }) {
					found = append(found, p)
				}
			}
		}
		add(processesWith("FM_E2E_MARKER", marker)...)
		add(processesWith("RUN_NAME", runName)...)
		add(livePIDs(pids, "RUN_NAME="+runName)...)
		return found
	}

	var started abortReport
	driver(t, ctx, &started, "drive_abort.py", "start", sdkEndpoint(m), dir, marker, fmt.Sprint(children))
	runName = started.Run
	// Every child's task code runs (it wrote started-*); the phases may lag
	// a moment behind the processes, so look again until they caught up.
	if msg := testkit.Poll(2*time.Minute, time.Second, func() string {
		active := 0
		for _, a := range started.Actions {
			if a.Phase == "RUNNING" || a.Phase == "INITIALIZING" {
				active++
			}
		}
		if active == children+1 {
			return ""
		}
		complaint := fmt.Sprintf("%d of run %s's actions are running, want all %d: %+v", active, runName, children+1, started.Actions)
		driver(t, ctx, &started, "drive_abort.py", "inspect", sdkEndpoint(m), runName)
		return complaint
	}); msg != "" {
		t.Errorf("before the abort, %s", msg)
	}
	// Positive control for the check after the abort: while the run holds,
	// its processes are found (parent, children, their helpers), also by the
	// marker from the run's env_vars, which every action's process inherits.
	pids := recordedPIDs(t, dir)
	if len(pids) != 1+2*children {
		t.Errorf("tasks recorded %d pids, want %d (parent, and each child with its helper)", len(pids), 1+2*children)
	}
	if live := runProcesses(pids); len(live) < 1+2*children {
		t.Errorf("before the abort, found %d processes of run %s, want %d: %v", len(live), runName, 1+2*children, live)
	}
	if withMarker := processesWith("FM_E2E_MARKER", marker); len(withMarker) < 1+2*children {
		t.Errorf("only %d processes of run %s have FM_E2E_MARKER from the run's env_vars, want all %d: envs must reach every action: %v",
			len(withMarker), runName, 1+2*children, withMarker)
	}

	var res abortReport
	driver(t, ctx, &res, "drive_abort.py", "abort", sdkEndpoint(m), runName)
	checkAborted := func(r abortReport) {
		t.Helper()
		if r.Phase != "ABORTED" {
			t.Errorf("aborted run %s is %s", r.Run, r.Phase)
		}
		if len(r.Actions) != children+1 {
			t.Errorf("run %s has %d actions, want %d: %+v", r.Run, len(r.Actions), children+1, r.Actions)
		}
		for _, a := range r.Actions {
			if a.Phase != "ABORTED" {
				t.Errorf("run %s: action %s (parent %q) is %s after the abort, want ABORTED", r.Run, a.Name, a.Parent, a.Phase)
			}
		}
	}
	checkAborted(res)
	if !strings.Contains(res.AbortReason, "e2e abort test") {
		t.Errorf("run %s: abort reason %q, want the one given to AbortRun (%q)", res.Run, res.AbortReason, "e2e abort test")
	}

	// No process of the run remains: not the tasks, not their helpers.
	if msg := testkit.Poll(60*time.Second, 500*time.Millisecond, func() string {
		if left := runProcesses(pids); len(left) > 0 {
			return fmt.Sprintf("processes of aborted run %s still running:\n%v", runName, left)
		}
		return ""
	}); msg != "" {
		t.Error(msg)
	}

	// Nothing runs again: released, a surviving or restarted child would
	// write after-*; a new attempt would write another started-*. The
	// signal that it would have by now: a sentinel task, submitted after the
	// release, started and ran past its own release to its end.
	startedFiles, _ := filepath.Glob(filepath.Join(dir, "started-*"))
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sentinelDir := testkit.TaskDir(t)
	var sentinel abortReport
	driver(t, ctx, &sentinel, "drive_abort.py", "sentinel", sdkEndpoint(m), sentinelDir)
	if done, _ := filepath.Glob(filepath.Join(sentinelDir, "after-*")); sentinel.Phase != "SUCCEEDED" || len(done) != 1 {
		t.Fatalf("the sentinel run %s is %s with %v, want SUCCEEDED past its release", sentinel.Run, sentinel.Phase, done)
	}
	if after, _ := filepath.Glob(filepath.Join(dir, "after-*")); len(after) > 0 {
		t.Errorf("a child of the aborted run was still running and finished: %v", after)
	}
	if later, _ := filepath.Glob(filepath.Join(dir, "started-*")); len(later) != len(startedFiles) {
		t.Errorf("children started again after the abort: %v, before %v", later, startedFiles)
	}
	var again abortReport
	driver(t, ctx, &again, "drive_abort.py", "inspect", sdkEndpoint(m), runName)
	checkAborted(again)
}
