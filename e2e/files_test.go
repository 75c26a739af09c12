package e2e

import (
	"strings"
	"testing"
	"time"

	"fmgr.dev/internal/testkit"
)

// Files a task writes in its working directory and returns with
// File.from_local / Dir.from_local (testdata/sdk/drive_files.py,
// wf_files.py), read by downstream tasks and by the client. With s3
// locations (S3 storage, or the manager's S3 endpoint over its file storage,
// the default) the SDK uploads them: they are in the bucket, and the working
// directories they came from are gone or never seen by the readers. With
// file locations (storage.s3Endpoint.taskLocations: file, and the kubernetes
// executor on shared file storage) the SDK keeps their local paths, so they
// point into the producing attempt's working directory: it must outlive the
// attempt, for downstream tasks and for the user.
func testFiles(t *testing.T, m *manager) {
	ctx := scenarioContext(t, 10*time.Minute)
	var res struct {
		Run, Phase, Error  string
		Downstream, Client struct {
			File, Report string
			Dir          []string
		}
		Paths struct{ File, Dir, Report string }
	}
	driverWith(t, ctx, m.ClientEnv(), &res, "drive_files.py", sdkEndpoint(m), testkit.TaskDir(t))
	if res.Phase != "SUCCEEDED" {
		t.Fatalf("run %s is %s, want SUCCEEDED: downstream tasks read what their upstream returned (error: %s)", res.Run, res.Phase, res.Error)
	}
	// On file locations the values point into working directories, not
	// copies in the storage (else this proves nothing): on the local
	// executor the attempts' under <home>/work; on kubernetes with shared
	// file storage the Pods', which are on that storage under <home>, not
	// in the node's directories that go with the Pods.
	where, what, uploaded := m.Home+"/work/", "an attempt's working directory", true
	switch {
	case m.S3 != nil:
		where, what = "s3://"+m.S3.Bucket+"/", "the manager's S3 bucket"
	case m.Kubernetes:
		where, what, uploaded = m.Home+"/", "a Pod's working directory on the manager's storage", false
	case m.S3Locations():
		where, what = "s3://flyte/", "the bucket of the manager's S3 endpoint"
	default:
		uploaded = false
	}
	for name, p := range map[string]string{"file": res.Paths.File, "dir": res.Paths.Dir, "report's file": res.Paths.Report} {
		if !uploaded {
			p = strings.TrimPrefix(p, "file://")
		}
		if !strings.HasPrefix(p, where) || (!uploaded && !strings.Contains(p, "/work/")) {
			t.Errorf("the returned %s is at %s, want it in %s under %s", name, p, what, where)
		}
	}
	wantDir := `["sub/deep.txt=kept (deep)","top.txt=kept (top)"]`
	for _, got := range []struct {
		who, file, report, wantReport string
		dir                           []string
	}{
		{"downstream tasks", res.Downstream.File, res.Downstream.Report, "weekly: kept (report)", res.Downstream.Dir},
		{"the client after the run", res.Client.File, res.Client.Report, "kept (report)", res.Client.Dir},
	} {
		if got.file != "kept" {
			t.Errorf("%s read the returned File as %q, want %q", got.who, got.file, "kept")
		}
		checkJSON(t, got.who+" reading the returned Dir", got.dir, wantDir)
		if got.report != got.wantReport {
			t.Errorf("%s read the dataclass's File as %q, want %q", got.who, got.report, got.wantReport)
		}
	}
}
