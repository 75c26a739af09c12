package e2e

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"fmgr.dev/internal/pgtest"
	"fmgr.dev/internal/testkit"
)

// Two managers on one PostgreSQL database (finding 3 of issue 6): the first
// holds the executor lease and runs every attempt, including those of runs
// submitted to the second, whose executor waits on standby (ready, and saying
// so). The holder is killed with SIGKILL while every run is in flight; the
// standby takes the lease over within a bounded time and brings every run to
// SUCCEEDED with its outputs, and no two copies of an action ever ran at once
// (each task holds a flock named after its action; a second concurrent copy
// records an overlap).
func TestTwoManagersShareTheExecutorLease(t *testing.T) {
	ctx := scenarioContext(t, 10*time.Minute)
	dsn := pgtest.NewDatabase(t)
	shared := testkit.TaskDir(t)
	lockDir := filepath.Join(shared, "locks")
	if err := os.MkdirAll(lockDir, 0o777); err != nil { // the tasks take their locks here
		t.Fatal(err)
	}
	// One storage and one signing key, as replicas behind one endpoint have.
	env := []string{
		"FLYTE_MANAGER_STORAGE_URL=file://" + filepath.Join(shared, "blobs"),
		"FLYTE_MANAGER_STORAGE_SIGNINGKEY=e2e-lease-shared-signing-key",
		"FLYTE_MANAGER_EXECUTOR_LOCAL_LEASETTL=5s",
		// Room for every attempt at once: the test holds them all running.
		"FLYTE_MANAGER_EXECUTOR_LOCAL_MAXPARALLELISM=16",
	}
	a := startSDKManager(t, dsn, env...)
	waitExecutorState(t, a, "lease holder")
	b := startSDKManager(t, dsn, env...)
	waitExecutorState(t, b, "standby")
	if m := b.metrics(); !strings.Contains(m, "flyte_manager_executor_lease_holder 0") {
		t.Errorf("the standby's metrics do not say it does not hold the lease:\n%s", linesMentioning(m, "lease"))
	}

	var fromA, fromB struct{ Runs map[string]string }
	driver(t, ctx, &fromA, "drive_lease.py", "submit", sdkEndpoint(a), lockDir, "a")
	driver(t, ctx, &fromB, "drive_lease.py", "submit", sdkEndpoint(b), lockDir, "b")
	runs := map[string]string{}
	for k, v := range fromA.Runs {
		runs[k] = v
	}
	for k, v := range fromB.Runs {
		runs[k] = v
	}
	if len(runs) != 4 {
		t.Fatalf("submitted %v", runs)
	}

	// In flight: every root and every fan-out child has started (on the
	// holder: the standby starts nothing).
	if msg := testkit.Poll(3*time.Minute, 200*time.Millisecond, func() string {
		starts := readOptionalFile(t, filepath.Join(lockDir, "starts"))
		for key, name := range runs {
			want := []string{"a0"}
			if strings.HasSuffix(key, "fanout") {
				want = append(want, "") // at least one child
			}
			for _, action := range want {
				if !leaseTaskStarted(starts, name, action) {
					return "run " + name + " (" + key + ") has not started everything"
				}
			}
		}
		return ""
	}); msg != "" {
		t.Fatalf("runs never got in flight: %s\nmanager a:\n%s", msg, a.output)
	}
	if !strings.Contains(b.metrics(), "flyte_manager_executor_attempts_started_total 0") {
		t.Errorf("the standby started attempts:\n%s", linesMentioning(b.metrics(), "attempts_started"))
	}

	a.Kill()
	killedAt := time.Now()
	waitExecutorState(t, b, "lease holder")
	t.Logf("the standby took the executor lease %s after the holder was killed", time.Since(killedAt).Round(100*time.Millisecond))
	if err := os.WriteFile(filepath.Join(lockDir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	var names []string
	for _, name := range runs {
		names = append(names, name)
	}
	var res struct {
		Runs map[string]struct {
			Phase  string
			Output any
			Error  string
		}
	}
	driver(t, ctx, &res, "drive_lease.py", append([]string{"wait", sdkEndpoint(b)}, names...)...)
	for key, name := range runs {
		want := 70.0 // leaf(7)
		if strings.HasSuffix(key, "fanout") {
			want = 30 // leaf(1) + leaf(2)
		}
		r := res.Runs[name]
		if r.Phase != "SUCCEEDED" || r.Output != want {
			t.Errorf("run %s (%s): %s, output %v (error %q); want SUCCEEDED with %v", name, key, r.Phase, r.Output, r.Error, want)
		}
	}
	if o := readOptionalFile(t, filepath.Join(lockDir, "overlap")); o != "" {
		t.Errorf("two copies of an action ran at once:\n%s", o)
	}
	m := b.metrics()
	for _, want := range []string{"flyte_manager_executor_lease_holder 1", "flyte_manager_executor_lease_takeovers_total 1"} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics of the new holder lack %q:\n%s", want, linesMentioning(m, "lease"))
		}
	}
	if t.Failed() {
		t.Logf("manager b output:\n%s", b.output)
	}
}

// waitExecutorState polls m's /readyz until it is ready and its executor line says
// state ("lease holder" or "standby").
func waitExecutorState(t *testing.T, m *manager, state string) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	var last string
	msg := testkit.Poll(90*time.Second, 100*time.Millisecond, func() string {
		resp, err := client.Get(m.URL + "/readyz")
		if err != nil {
			last = err.Error()
			return last
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		last = string(body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(last, "executor: ok ("+state) {
			return last
		}
		return ""
	})
	if msg != "" {
		t.Fatalf("the executor of %s did not report %q: last /readyz:\n%s\noutput:\n%s", m.URL, state, last, m.output)
	}
}

// leaseTaskStarted says whether starts records an attempt of run's action (any
// action other than a0 when action is "").
func leaseTaskStarted(starts, run, action string) bool {
	for _, line := range strings.Split(starts, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "start" || f[1] != run {
			continue
		}
		if f[2] == action || (action == "" && f[2] != "a0") {
			return true
		}
	}
	return false
}

func readOptionalFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func linesMentioning(text, word string) string {
	var out []string
	re := regexp.MustCompile(regexp.QuoteMeta(word))
	for _, l := range strings.Split(text, "\n") {
		if re.MatchString(l) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
