package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/internal/testkit"
)

// The output cache end to end (testdata/sdk/drive_cache.py, wf_cache.py):
// tasks declared with cache= run once for identical inputs and cache
// version; later identical actions end CACHE_HIT without a process or Pod.

// kubePods is the Pod record of TestSDKKubernetes while it runs (nil under
// TestSDK): the cache scenarios check that a hit created no Pod.
var kubePods *podLog

type cacheRun struct {
	Run, Phase, Error, Action string
	ActionPhase               string `json:"action_phase"`
	CacheStatus               string `json:"cache_status"`
	Output                    any
	Attempts                  []attemptInfo
}

// executions are the lines wf_cache.py's tasks appended to dir/executions:
// one per execution of task code.
func executions(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "executions"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(data), "\n"), "\n")
}

// launched lists what the executor launched for r's cached action: its
// Pods (kubernetes executor) or attempt directories (local executor).
func launched(m *manager, r cacheRun) []string {
	var found []string
	if m.Kubernetes {
		if kubePods != nil {
			for _, p := range kubePods.ofRun(r.Run) {
				if p.Labels[v1.LabelAction] == v1.LabelValue(r.Action) {
					found = append(found, "Pod "+p.Name)
				}
			}
		}
		return found
	}
	dirs, _ := filepath.Glob(filepath.Join(m.Home, "work", "*", testProject, testDomain, r.Run, r.Action, "*"))
	return dirs
}

// checkNothingStarted checks that r's cached action started nothing: its
// one attempt never reached INITIALIZING or RUNNING, and the executor
// launched nothing for it (no attempt directory, no Pod).
func checkNothingStarted(t *testing.T, m *manager, r cacheRun) {
	t.Helper()
	if len(r.Attempts) != 1 {
		t.Errorf("run %s: the cache hit has %d attempts, want 1: %+v", r.Run, len(r.Attempts), r.Attempts)
	}
	for _, a := range r.Attempts {
		for _, tr := range a.Transitions {
			if tr.Phase == "INITIALIZING" || tr.Phase == "RUNNING" {
				t.Errorf("run %s: the cache hit's attempt %d went through %s: %+v", r.Run, a.Attempt, tr.Phase, a.Transitions)
			}
		}
	}
	if l := launched(m, r); len(l) > 0 {
		t.Errorf("run %s: action %s is a cache hit, yet the executor launched %v", r.Run, r.Action, l)
	}
}

// The same cacheable task run twice (the second time with another value of
// an ignored input), then called with the same inputs as a child: the first
// executes and populates the cache, the others are hits that start nothing
// and read the same outputs. The child's hit proves the manager computes a
// root action's cache key exactly as the SDK computes a child's.
func testCacheRepeat(t *testing.T, m *manager) {
	ctx := scenarioContext(t, 8*time.Minute)
	dir := testkit.TaskDir(t)
	var res struct{ First, Second, Child cacheRun }
	driverWith(t, ctx, m.ClientEnv(), &res, "drive_cache.py", "repeat", sdkEndpoint(m), dir)

	for _, r := range []cacheRun{res.First, res.Second, res.Child} {
		if r.Phase != "SUCCEEDED" || r.ActionPhase != "SUCCEEDED" {
			t.Fatalf("run %s is %s (cached action %s %s): %s", r.Run, r.Phase, r.Action, r.ActionPhase, r.Error)
		}
		checkJSON(t, "run "+r.Run+" output", r.Output, "36")
	}
	if got := res.First.CacheStatus; got != "CACHE_POPULATED" {
		t.Errorf("first run %s: cache status %s, want CACHE_POPULATED", res.First.Run, got)
	}
	// The control for the checks of the hits: the miss launched its attempt.
	if l := launched(m, res.First); len(l) == 0 && (!m.Kubernetes || kubePods != nil) {
		t.Errorf("first run %s: nothing launched was found for it, so finding nothing for the hits proves nothing", res.First.Run)
	}
	for what, r := range map[string]cacheRun{"second run": res.Second, "child call": res.Child} {
		if r.CacheStatus != "CACHE_HIT" {
			t.Errorf("%s %s (action %s): cache status %s, want CACHE_HIT", what, r.Run, r.Action, r.CacheStatus)
		}
		checkNothingStarted(t, m, r)
	}
	if ex := executions(t, dir); len(ex) != 1 {
		t.Errorf("square ran %d times, want once: %q", len(ex), ex)
	}

	// `flyte get action` shows each action's cache status.
	cli := t.TempDir()
	cliConfig(t, ctx, m, cli)
	for _, r := range []cacheRun{res.First, res.Second} {
		if out := mustFlyte(t, ctx, cli, "get", "action", r.Run, r.Action); !strings.Contains(out, r.CacheStatus) {
			t.Errorf("flyte get action %s %s does not show its cache status %s:\n%s", r.Run, r.Action, r.CacheStatus, out)
		}
	}
}

// Five concurrent runs of one serialized cacheable task: one executes while
// the others wait (WAITING_FOR_RESOURCES), then they hit its outputs.
func testCacheSerialized(t *testing.T, m *manager) {
	ctx := scenarioContext(t, 10*time.Minute)
	dir := testkit.TaskDir(t)
	release := filepath.Join(testkit.TaskDir(t), "release")
	t.Cleanup(func() { _ = os.WriteFile(release, nil, 0o644) })
	const n = 5
	var res struct {
		Waiting []string
		Runs    []cacheRun
	}
	driver(t, ctx, &res, "drive_cache.py", "serial", sdkEndpoint(m), dir, release, strconv.Itoa(n))
	waiting := 0
	for _, p := range res.Waiting {
		if p == "WAITING_FOR_RESOURCES" {
			waiting++
		}
	}
	if waiting != n-1 {
		t.Errorf("while the holder executed the runs were %v, want %d WAITING_FOR_RESOURCES", res.Waiting, n-1)
	}
	checkSerialized(t, m, res.Runs, n, 1)
	if ex := executions(t, dir); len(ex) != 1 {
		t.Errorf("%d identical serialized runs executed %d times, want once: %q", n, len(ex), ex)
	}
}

// checkSerialized checks n identical serialized runs that all succeeded
// with x=9's output: one populated the cache in holderAttempts attempts,
// the rest are hits that started nothing.
func checkSerialized(t *testing.T, m *manager, runs []cacheRun, n, holderAttempts int) {
	t.Helper()
	if len(runs) != n {
		t.Fatalf("%d runs reported, want %d", len(runs), n)
	}
	populated := 0
	for _, r := range runs {
		if r.Phase != "SUCCEEDED" {
			t.Errorf("run %s is %s: %s", r.Run, r.Phase, r.Error)
			continue
		}
		checkJSON(t, "run "+r.Run+" output", r.Output, "81")
		switch r.CacheStatus {
		case "CACHE_POPULATED":
			populated++
			if len(r.Attempts) != holderAttempts {
				t.Errorf("the holder %s has %d attempts, want %d: %+v", r.Run, len(r.Attempts), holderAttempts, r.Attempts)
			}
		case "CACHE_HIT":
			checkNothingStarted(t, m, r)
		default:
			t.Errorf("run %s: cache status %s, want CACHE_HIT or (once) CACHE_POPULATED", r.Run, r.CacheStatus)
		}
	}
	if populated != 1 {
		t.Errorf("%d runs populated the cache, want exactly 1", populated)
	}
}

var pidField = regexp.MustCompile(`pid=(\d+)`)

// TestCacheHolderCrash: the manager dies (SIGKILL) while the holder of a
// serialized task's reservation executes, and the holder's process dies
// with it. After the restart the holder's attempt is found orphaned and
// runs again; the four identical runs keep waiting and then hit. The work
// runs exactly once more, not five times.
func TestCacheHolderCrash(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			m := startSDKManager(t, b.dsn(t))
			ctx := scenarioContext(t, 10*time.Minute)
			dir := testkit.TaskDir(t)
			release := filepath.Join(testkit.TaskDir(t), "release")
			t.Cleanup(func() { _ = os.WriteFile(release, nil, 0o644) })
			const n = 5
			var held struct {
				Runs   []string
				Phases []string
			}
			driver(t, ctx, &held, "drive_cache.py", "start", sdkEndpoint(m), dir, release, strconv.Itoa(n))
			ex := executions(t, dir)
			if len(ex) != 1 {
				t.Fatalf("while holding: %d executions, want 1: %q", len(ex), ex)
			}
			match := pidField.FindStringSubmatch(ex[0])
			if match == nil {
				t.Fatalf("no pid in %q", ex[0])
			}
			pid, _ := strconv.Atoi(match[1])
			t.Log("killing the manager and the holder's task process")
			m.Kill()
			_ = syscall.Kill(pid, syscall.SIGKILL)
			m.Restart()
			// The holder's second attempt executes; then let it finish.
			if msg := testkit.Poll(5*time.Minute, 500*time.Millisecond, func() string {
				if got := executions(t, dir); len(got) < 2 {
					return "the holder did not run again after the restart: " + strings.Join(got, "; ")
				}
				return ""
			}); msg != "" {
				t.Fatal(msg)
			}
			if err := os.WriteFile(release, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			var res struct{ Runs []cacheRun }
			driver(t, ctx, &res, "drive_cache.py", append([]string{"finish", sdkEndpoint(m)}, held.Runs...)...)
			checkSerialized(t, m, res.Runs, n, 2)
			if got := executions(t, dir); len(got) != 2 {
				t.Errorf("the work ran %d times in all, want twice (once more after the crash): %q", len(got), got)
			}
		})
	}
}

var heartbeatsMetric = regexp.MustCompile(`(?m)^flyte_manager_cache_reservation_heartbeats_total (\d+)`)

// testCacheHolderRestart (kubernetes executor, which adopts the Pods of a
// manager that died): the manager is killed (SIGKILL) while the holder of
// a serialized task's reservation executes, and restarted with 1s
// heartbeats (3s expiry). The restarted manager adopts the holder's Pod and
// heartbeats its reservation, which outlives several expiry windows without
// any of the four waiting runs taking over: the work runs exactly once. (The
// local executor cannot adopt a process: there the holder runs again, see
// TestCacheHolderCrash.)
func testCacheHolderRestart(t *testing.T, m *manager) {
	ctx := scenarioContext(t, 10*time.Minute)
	dir := testkit.TaskDir(t)
	release := filepath.Join(testkit.TaskDir(t), "release")
	t.Cleanup(func() { _ = os.WriteFile(release, nil, 0o644) })
	const n = 5
	var held struct{ Runs []string }
	driver(t, ctx, &held, "drive_cache.py", "start", sdkEndpoint(m), dir, release, strconv.Itoa(n))
	t.Log("killing the manager while the holder executes")
	m.Kill()
	m.Restart("FLYTE_MANAGER_CACHE_MAXRESERVATIONHEARTBEAT=1s")
	// Six heartbeats of the restarted manager: 5s and more, past the 3s in
	// which a reservation nobody heartbeats expires.
	if msg := testkit.Poll(3*time.Minute, 200*time.Millisecond, func() string {
		match := heartbeatsMetric.FindStringSubmatch(m.metrics())
		if match == nil {
			return "no reservation heartbeats after the restart"
		}
		if beats, _ := strconv.Atoi(match[1]); beats < 6 {
			return fmt.Sprintf("only %d reservation heartbeats after the restart", beats)
		}
		return ""
	}); msg != "" {
		t.Fatal(msg)
	}
	if ex := executions(t, dir); len(ex) != 1 {
		t.Fatalf("after the restart the work ran %d times while the holder held, want once: %q", len(ex), ex)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var res struct{ Runs []cacheRun }
	driver(t, ctx, &res, "drive_cache.py", append([]string{"finish", sdkEndpoint(m)}, held.Runs...)...)
	checkSerialized(t, m, res.Runs, n, 1)
	if ex := executions(t, dir); len(ex) != 1 {
		t.Errorf("the work ran %d times, want once: %q", len(ex), ex)
	}
}
