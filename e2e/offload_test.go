package e2e

import (
	"strings"
	"testing"
	"time"

	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/testkit"
)

// TestSDKOffload: on the manager's default storage, tasks return a Dir and
// Files made in temporary directories they remove before returning
// (testdata/sdk/wf_offload.py), and downstream tasks and the client still
// read them, as on S3: tasks get s3:// locations through the manager's S3
// endpoint, so the SDK uploads what they return instead of keeping a path
// (which pointed into the removed directory when tasks got file paths).
// The second run's cached File is read back the same way. Then the same
// on S3 storage, where it held already.
func TestSDKOffload(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		testOffload(t, startSDKManager(t, dbtest.SQLiteDSN(t)))
	})
	t.Run("s3", func(t *testing.T) {
		testOffload(t, startSDKManagerOnS3(t, dbtest.SQLiteDSN(t)))
	})
}

func testOffload(t *testing.T, m *manager) {
	ctx := scenarioContext(t, 10*time.Minute)
	type files struct {
		Dir            []string
		File, Snapshot string
	}
	type run struct {
		Run, Phase, Error  string
		SnapshotCache      string `json:"snapshot_cache"`
		Downstream, Client files
		Paths              struct{ Dir, File, Snapshot string }
	}
	var res struct{ First, Second run }
	driverWith(t, ctx, m.ClientEnv(), &res, "drive_offload.py", sdkEndpoint(m), testkit.TaskDir(t))
	want := files{
		Dir:      []string{"a.txt=kept a", "nested/b.txt=kept b", "nested/deeper/c.bin=1048576 bytes, sum 133693440"},
		File:     "kept note",
		Snapshot: "kept snapshot",
	}
	where := "s3://flyte/"
	if m.S3 != nil {
		where = "s3://" + m.S3.Bucket + "/"
	}
	for _, r := range []struct {
		name, cache string
		got         run
	}{{"first", "CACHE_POPULATED", res.First}, {"second", "CACHE_HIT", res.Second}} {
		if r.got.Phase != "SUCCEEDED" {
			t.Fatalf("%s run %s is %s, want SUCCEEDED: what tasks returned from removed directories must have been uploaded (error: %s)", r.name, r.got.Run, r.got.Phase, r.got.Error)
		}
		for who, got := range map[string]files{"downstream tasks": r.got.Downstream, "the client": r.got.Client} {
			if strings.Join(got.Dir, "|") != strings.Join(want.Dir, "|") || got.File != want.File || got.Snapshot != want.Snapshot {
				t.Errorf("%s run: %s read %+v, want %+v", r.name, who, got, want)
			}
		}
		for name, p := range map[string]string{"dir": r.got.Paths.Dir, "file": r.got.Paths.File, "snapshot": r.got.Paths.Snapshot} {
			if !strings.HasPrefix(p, where) {
				t.Errorf("%s run: the returned %s is at %s, want it uploaded under %s", r.name, name, p, where)
			}
		}
		if r.got.SnapshotCache != r.cache {
			t.Errorf("%s run: snapshot's cache status is %s, want %s", r.name, r.got.SnapshotCache, r.cache)
		}
	}
}
