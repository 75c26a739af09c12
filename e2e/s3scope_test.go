package e2e

import (
	"os"
	"strings"
	"testing"
	"time"
)

// testS3Scope: a task's storage key is its own (issue #21's isolation).
// With the manager's S3 endpoint, a task of one run tries, through
// flyte.storage and the key its attempt was given, to read another
// project's output and to overwrite it and another run's of its own
// project: the endpoint refuses each (the endpoint's own key, which tasks
// got before, allowed all three), the outputs are unchanged, and reading
// the other run of its own project (what a cache hit's downstream does)
// still works.
func testS3Scope(t *testing.T, m *manager) {
	if !m.S3Locations() {
		t.Skip("tasks get the manager's S3 endpoint only with file storage and the local executor")
	}
	ctx := scenarioContext(t, 8*time.Minute)
	const other = "e2e-scope-b"
	var res struct {
		Theirs, Mine, Run, Phase, Error string
		MineAfter                       string `json:"mine_after"`
		Probe                           map[string]string
	}
	driver(t, ctx, &res, "drive_s3scope.py", sdkEndpoint(m), other)
	if res.Phase != "SUCCEEDED" {
		t.Fatalf("probing run %s is %s: %s", res.Run, res.Phase, res.Error)
	}
	for what, want := range map[string]string{
		"read_other_project":      "refused",
		"overwrite_other_project": "refused",
		"overwrite_other_run":     "refused",
		"read_same_project":       "read ",
	} {
		if got := res.Probe[what]; !strings.HasPrefix(got, want) {
			t.Errorf("the task's %s: %q, want %q...", what, got, want)
		}
	}
	for _, r := range []struct{ project, run string }{{other, res.Theirs}, {testProject, res.Mine}} {
		p := m.blobPath("s3://flyte/runs/_/" + r.project + "/" + testDomain + "/" + r.run + "/a0/1/outputs.pb")
		b, err := os.ReadFile(p)
		if err != nil || strings.Contains(string(b), "overwritten") {
			t.Errorf("output of run %s in %s after the probe: %q, %v; want it as its run wrote it", r.run, r.project, b, err)
		}
	}
	checkJSON(t, "the other run's output read after the probe", res.MineAfter, `"another run's output"`)
}
