package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/gen/go/flyteidl2/workflow/workflowconnect"
	"fmgr.dev/internal/testkit"
)

// Retention with the real SDK, on both databases: three runs of a cached
// task (the miss that populates the entry, a hit, a hit as a child) end;
// with a retention of 1s, `flyte-manager gc --dry-run` lists the three and
// deletes nothing, `flyte-manager gc` deletes them: the API answers
// NotFound for each, and their objects and attempt directories are gone,
// but for the attempt the cache entry points at. The same run again is a
// hit on that entry, with its output, and the task still ran once.
func TestRetention(t *testing.T) {
	venv(t)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			env := []string{"FLYTE_MANAGER_RETENTION_DEFAULT=1s", "FLYTE_MANAGER_RETENTION_INTERVAL=0"}
			m := startSDKManager(t, b.dsn(t), env...)
			ctx := scenarioContext(t, 8*time.Minute)
			dir := testkit.TaskDir(t)
			var res struct{ First, Second, Child cacheRun }
			driverWith(t, ctx, m.ClientEnv(), &res, "drive_cache.py", "repeat", sdkEndpoint(m), dir)
			all := []cacheRun{res.First, res.Second, res.Child}
			for _, r := range all {
				if r.Phase != "SUCCEEDED" {
					t.Fatalf("run %s is %s: %s", r.Run, r.Phase, r.Error)
				}
			}
			if res.First.CacheStatus != "CACHE_POPULATED" {
				t.Fatalf("first run %s: cache status %s, want CACHE_POPULATED", res.First.Run, res.First.CacheStatus)
			}

			gc := func(args ...string) string {
				t.Helper()
				cmd := exec.CommandContext(ctx, managerBin, append([]string{"gc", "--home", m.Home, "--db", m.DSN}, args...)...)
				cmd.Env = append(os.Environ(), env...)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("flyte-manager gc %v: %v\n%s", args, err, out)
				}
				return string(out)
			}
			runs := workflowconnect.NewRunServiceClient(rpcClient, m.URL)
			runID := func(name string) *common.RunIdentifier {
				return &common.RunIdentifier{Project: testProject, Domain: "development", Name: name}
			}
			runDirs := filepath.Join(m.Home, "blobs", "runs", "_", testProject, "development")
			workDirs := filepath.Join(m.Home, "work", "_", testProject, "development")
			for _, r := range all {
				if _, err := os.Stat(filepath.Join(workDirs, r.Run)); r.Run == res.First.Run && err != nil {
					t.Fatalf("the populating run's attempt directory: %v", err)
				}
			}

			// A dry run lists the three once they are past the retention of
			// 1s, measured from their ends.
			var dry string
			testkit.Eventually(t, "gc --dry-run to list the three runs", time.Minute, func() bool {
				dry = gc("--dry-run")
				return strings.Contains(dry, "would delete 3 runs")
			})
			for _, r := range all {
				if !strings.Contains(dry, "would delete run /"+testProject+"/development/"+r.Run+"\n") {
					t.Errorf("gc --dry-run does not list run %s:\n%s", r.Run, dry)
				}
			}
			for _, r := range all {
				if _, err := runs.GetRunDetails(ctx, connect.NewRequest(&workflow.GetRunDetailsRequest{RunId: runID(r.Run)})); err != nil {
					t.Fatalf("after the dry run, GetRunDetails %s: %v", r.Run, err)
				}
			}

			out := gc()
			if !strings.Contains(out, "deleted 3 runs") {
				t.Fatalf("gc:\n%s", out)
			}
			for _, r := range all {
				_, err := runs.GetRunDetails(ctx, connect.NewRequest(&workflow.GetRunDetailsRequest{RunId: runID(r.Run)}))
				if connect.CodeOf(err) != connect.CodeNotFound {
					t.Errorf("GetRunDetails %s after gc: %v, want NotFound", r.Run, err)
				}
				_, err = runs.GetActionData(ctx, connect.NewRequest(&workflow.GetActionDataRequest{
					ActionId: &common.ActionIdentifier{Run: runID(r.Run), Name: "a0"},
				}))
				if connect.CodeOf(err) != connect.CodeNotFound {
					t.Errorf("GetActionData %s after gc: %v, want NotFound", r.Run, err)
				}
				blobs, work := files(t, filepath.Join(runDirs, r.Run)), files(t, filepath.Join(workDirs, r.Run))
				if r.Run != res.First.Run {
					if len(blobs)+len(work) != 0 {
						t.Errorf("run %s left objects %v and attempt files %v", r.Run, blobs, work)
					}
					continue
				}
				// The cache entry's attempt stays, whole, and nothing else.
				for what, got := range map[string][]string{"objects": blobs, "attempt files": work} {
					if len(got) == 0 || slices.ContainsFunc(got, func(f string) bool { return !strings.HasPrefix(f, "a0/1/") }) {
						t.Errorf("the populating run %s keeps %s %v, want its cached attempt a0/1 only", r.Run, what, got)
					}
				}
			}

			var again struct{ First, Second, Child cacheRun }
			driverWith(t, ctx, m.ClientEnv(), &again, "drive_cache.py", "repeat", sdkEndpoint(m), dir)
			if again.First.CacheStatus != "CACHE_HIT" || again.First.Phase != "SUCCEEDED" {
				t.Errorf("the same run after gc: %s, cache status %s, want a hit: %s", again.First.Phase, again.First.CacheStatus, again.First.Error)
			}
			checkJSON(t, "run "+again.First.Run+" output", again.First.Output, "36")
			if ex := executions(t, dir); len(ex) != 1 {
				t.Errorf("square ran %d times, want once: %q", len(ex), ex)
			}
		})
	}
}

// files lists the regular files under dir, relative to it ("" for none).
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if os.IsNotExist(err) {
			return filepath.SkipDir
		}
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return out
}
