package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"fmgr.dev/internal/testkit"
)

// testQueuesYAML declares the named queues every manager the harness starts
// has (startManagerWith passes it with --config): the queues scenario routes
// to them; the other scenarios name no queue, so they are not bounded.
const testQueuesYAML = `queues:
  - name: e2e-serial-1
    maxActionConcurrency: 1
  - name: e2e-small-3
    maxActionConcurrency: 3
  - name: e2e-depth-5
    maxDepth: 5
  - name: e2e-runs-1
    maxRunConcurrency: 1
`

// queuesConfigFile writes testQueuesYAML for one manager.
func queuesConfigFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "queues.yaml")
	if err := os.WriteFile(path, []byte(testQueuesYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

type queueRun struct {
	Run, Phase, Error string
	Output            any
	// Waits are the reasons the run's children waited for their queue.
	Waits []string
}

var stepLine = regexp.MustCompile(`^(\S+) most=(\d+) `)

// fanOutOnQueue runs the driver's fan-out of n steps on the queue the
// driver calls kind, checks that the run succeeded with every step run, and
// returns the run and how many steps each step saw running at once.
func fanOutOnQueue(ctx context.Context, t *testing.T, m *manager, kind string, n int) (queueRun, map[string]int) {
	t.Helper()
	dir := testkit.TaskDir(t)
	var r queueRun
	driver(t, ctx, &r, "drive_queues.py", "fanout", sdkEndpoint(m), kind, dir, strconv.Itoa(n))
	if r.Phase != "SUCCEEDED" {
		t.Fatalf("run %s is %s: %s", r.Run, r.Phase, r.Error)
	}
	seen := stepsSeen(t, dir)
	if len(seen) != n {
		t.Errorf("%d steps ran, want %d: %v", len(seen), n, seen)
	}
	return r, seen
}

// stepsSeen is, per step, the most steps sharing dir it saw running at once
// (wf_queues._occupy).
func stepsSeen(t *testing.T, dir string) map[string]int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "steps"))
	if err != nil {
		t.Fatalf("no step recorded what it saw: %v", err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		m := stepLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("step record %q", line)
		}
		if _, dup := out[m[1]]; dup {
			t.Errorf("%s ran twice: %s", m[1], data)
		}
		out[m[1]], _ = strconv.Atoi(m[2])
	}
	return out
}

// Named queues: caps on concurrent actions and runs, depth with
// backpressure, and unknown queues refused at submit.
func testQueues(t *testing.T, m *manager) {
	ctx := scenarioContext(t, 20*time.Minute)

	// queue= on a task: at most one step of the capacity-1 queue runs at once.
	t.Run("serial", func(t *testing.T) {
		r, seen := fanOutOnQueue(ctx, t, m, "serial", 5)
		for step, most := range seen {
			if most != 1 {
				t.Errorf("%s of queue e2e-serial-1 (maxActionConcurrency 1) saw %d steps running at once", step, most)
			}
		}
		// Submitted together, the steps waited for the queue and were told so.
		want := `queue "e2e-serial-1" is at its maxActionConcurrency of 1 (attempts running)`
		if !slices.Contains(r.Waits, want) {
			t.Errorf("no step of run %s waited with reason %q: %q", r.Run, want, r.Waits)
		}
	})

	// queue= by task.override: at most three of seven run at once, and
	// some do run together.
	t.Run("capacity-3", func(t *testing.T) {
		_, seen := fanOutOnQueue(ctx, t, m, "small", 7)
		overlapped := 0
		for step, most := range seen {
			if most > 3 {
				t.Errorf("%s of queue e2e-small-3 (maxActionConcurrency 3) saw %d steps running at once", step, most)
			}
			if most >= 2 {
				overlapped++
			}
		}
		if overlapped == 0 {
			t.Errorf("no two steps of queue e2e-small-3 ran together: %v", seen)
		}
	})

	// maxDepth 5: the sixth and later submissions are refused with
	// RESOURCE_EXHAUSTED naming the queue (the SDK retries a refused
	// child until there is room), nothing is written for them, and all
	// eight run once the first ones end.
	t.Run("depth", func(t *testing.T) {
		dir := testkit.TaskDir(t)
		release := filepath.Join(testkit.TaskDir(t), "release")
		t.Cleanup(func() { _ = os.WriteFile(release, nil, 0o644) })
		var r struct {
			queueRun
			WhenFull int `json:"when_full"`
			After    int
			Refused  string
		}
		driver(t, ctx, &r, "drive_queues.py", "depth", sdkEndpoint(m), dir, release, "8")
		if r.WhenFull != 5 {
			t.Errorf("with queue e2e-depth-5 full, run %s had %d children, want 5", r.Run, r.WhenFull)
		}
		if !strings.Contains(r.Refused, "[code RESOURCE_EXHAUSTED]") || !strings.Contains(r.Refused, `queue "e2e-depth-5" is full`) {
			t.Errorf("a run submitted to the full queue: %s; want RESOURCE_EXHAUSTED naming the queue", r.Refused)
		}
		if r.Phase != "SUCCEEDED" || r.After != 8 {
			t.Errorf("run %s is %s with %d children, want SUCCEEDED with all 8: %s", r.Run, r.Phase, r.After, r.Error)
		}
		checkJSON(t, "outputs", r.Output, `[0,1,2,3,4,5,6,7]`)
	})

	// with_runcontext(queue=...) on a maxRunConcurrency-1 queue: the two
	// runs' roots never run together; each run's children do.
	t.Run("runs-1", func(t *testing.T) {
		dir, kidsA, kidsB := testkit.TaskDir(t), testkit.TaskDir(t), testkit.TaskDir(t)
		var r struct{ Runs []queueRun }
		driver(t, ctx, &r, "drive_queues.py", "runs", sdkEndpoint(m), dir, kidsA, kidsB)
		waited := 0
		for _, run := range r.Runs {
			if run.Phase != "SUCCEEDED" {
				t.Errorf("run %s is %s: %s", run.Run, run.Phase, run.Error)
			}
			if slices.Contains(run.Waits, `queue "e2e-runs-1" is at its maxRunConcurrency of 1 (runs in flight)`) {
				waited++
			}
		}
		if waited == 0 {
			t.Errorf("neither run's root waited for queue e2e-runs-1 with a reason naming it: %+v", r.Runs)
		}
		for root, most := range stepsSeen(t, dir) {
			if most != 1 {
				t.Errorf("the root of run %s on queue e2e-runs-1 (maxRunConcurrency 1) saw %d roots running at once", root, most)
			}
		}
		for _, kids := range []string{kidsA, kidsB} {
			for child, most := range stepsSeen(t, kids) {
				if most != 2 {
					t.Errorf("%s of a run on e2e-runs-1 saw %d children running, want its sibling beside it (children are not capped)", child, most)
				}
			}
		}
	})

	// An unknown queue is refused at submit: CreateRun, and a child's
	// Enqueue (which fails its parent), each naming the queue.
	t.Run("unknown", func(t *testing.T) {
		var r struct {
			RunError string `json:"run_error"`
			Child    queueRun
		}
		driver(t, ctx, &r, "drive_queues.py", "unknown", sdkEndpoint(m))
		if !strings.Contains(r.RunError, "[code INVALID_ARGUMENT]") {
			t.Errorf("a run on an unknown queue: %q, want INVALID_ARGUMENT", r.RunError)
		}
		for what, msg := range map[string]string{"a run": r.RunError, "a child": r.Child.Error} {
			if !strings.Contains(msg, `unknown queue "e2e-no-such-queue"`) || !strings.Contains(msg, `"e2e-serial-1"`) {
				t.Errorf("%s on an unknown queue: %q, want the queue named with the known ones", what, msg)
			}
		}
		if r.Child.Phase != "FAILED" {
			t.Errorf("run %s whose child names an unknown queue is %s, want FAILED", r.Child.Run, r.Child.Phase)
		}
	})
}
