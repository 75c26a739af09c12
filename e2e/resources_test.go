package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"fmgr.dev/internal/testkit"
)

// Resource requests in local mode (testdata/sdk/drive_resources.py,
// wf_resources.py): a task requesting an A100, or more memory than the host
// has, never runs on this GPU-less host; it waits and times out (the
// default, executor.local.resources.unsatisfiable: wait) or fails at once
// (fail), naming what is missing. A task requesting nothing still runs.
// Local only: on kubernetes the cluster's scheduler places Pods.

type resourceRun struct {
	Run, Phase, Error string
	Attempts          []attemptInfo
}

// checkResources runs the scenario against m and checks that the two
// unsatisfiable tasks ended in want with their errors naming what was
// missing, without running.
func checkResources(t *testing.T, m *manager, want string) {
	ctx := scenarioContext(t, 8*time.Minute)
	marks := testkit.TaskDir(t)
	var res map[string]resourceRun
	driver(t, ctx, &res, "drive_resources.py", sdkEndpoint(m), marks)

	if r := res["ordinary"]; r.Phase != "SUCCEEDED" {
		t.Errorf("run %s of a task requesting nothing is %s, want SUCCEEDED (error: %s)", r.Run, r.Phase, r.Error)
	}
	for key, missing := range map[string]string{"gpu": "1 nvidia-tesla-a100 GPU", "memory": "64Ti of memory"} {
		r := res[key]
		if r.Phase != want {
			t.Errorf("run %s requesting %s is %s, want %s (error: %s)", r.Run, missing, r.Phase, want, r.Error)
		}
		if !strings.Contains(r.Error, missing) {
			t.Errorf("run %s: error %q does not name what the host lacks (%s)", r.Run, r.Error, missing)
		}
		if want == "TIMED_OUT" && !strings.Contains(r.Error, "queued timeout of 5s") {
			t.Errorf("run %s: error %q does not name the queued timeout", r.Run, r.Error)
		}
		var seen []string
		for _, a := range r.Attempts {
			for _, tr := range a.Transitions {
				seen = append(seen, tr.Phase)
			}
		}
		if len(r.Attempts) != 1 || slices.Contains(seen, "RUNNING") || slices.Contains(seen, "INITIALIZING") {
			t.Errorf("run %s: attempts %+v, want one that never started", r.Run, r.Attempts)
		}
		if want == "TIMED_OUT" && !slices.Contains(seen, "WAITING_FOR_RESOURCES") {
			t.Errorf("run %s: phases %v, want WAITING_FOR_RESOURCES before the timeout", r.Run, seen)
		}
	}
	ran, _ := filepath.Glob(filepath.Join(marks, "*"))
	for _, f := range ran {
		if name := filepath.Base(f); name != "ordinary" {
			b, _ := os.ReadFile(f)
			t.Errorf("task %s ran (CUDA_VISIBLE_DEVICES=%s) on a host that cannot satisfy it", name, b)
		}
	}
}

// testResourcesWait is the sdkScenario: the shared manager has the default
// policy, wait.
func testResourcesWait(t *testing.T, m *manager) {
	if m.Kubernetes {
		t.Skip("local executor only: on kubernetes the cluster's scheduler decides where a Pod fits")
	}
	checkResources(t, m, "TIMED_OUT")
}

// TestResourcesFail: with unsatisfiable: fail, the same tasks fail at once.
func TestResourcesFail(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			m := startSDKManager(t, b.dsn(t), "FLYTE_MANAGER_EXECUTOR_LOCAL_RESOURCES_UNSATISFIABLE=fail")
			checkResources(t, m, "FAILED")
		})
	}
}
