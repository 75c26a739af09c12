package local

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fmgr.dev/cache"
	"fmgr.dev/executor/attempt"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
	"fmgr.dev/internal/testkit"
)

// The local driver with the output cache: of three identical runs of a
// serialized cached task one runs its process while the others wait
// (WAITING_FOR_RESOURCES, looked at again until the holder is done), then
// they succeed from the cache without a process; a later identical run hits
// at once.
func TestCachedSerializedRuns(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		oc := cache.New(config.Default().Cache, h.db, h.blobs, h.st.Actions, h.log)
		h.driverWith(func(d *Driver) { d.WithHooks(attempt.Hooks{Cache: oc.Hook()}) })
		release := filepath.Join(h.shared, "release")
		script := `echo "$RUN_NAME" >> "$SHARED/ran"; while [ ! -e "$SHARED/release" ]; do sleep 0.05; done; ` + succeed
		o := taskOpts{cacheVersion: "v1", serialize: true}
		run := func(name string) store.ActionKey { return h.runOf(name, h.spec("cached", script, o)) }
		keys := []store.ActionKey{run("rcache1"), run("rcache2"), run("rcache3")}

		ran := func() []string {
			b, _ := os.ReadFile(filepath.Join(h.shared, "ran"))
			return strings.Fields(string(b))
		}
		if msg := testkit.Poll(time.Minute, 20*time.Millisecond, func() string {
			waiting := 0
			for _, k := range keys {
				if a, err := h.st.Actions.Get(h.ctx, k); err == nil && a.Phase == phase.WaitingForResources {
					waiting++
				}
			}
			if len(ran()) == 1 && waiting == 2 {
				return ""
			}
			return fmt.Sprintf("ran %v, %d waiting", ran(), waiting)
		}); msg != "" {
			t.Fatalf("want one run executing and two waiting; %s", msg)
		}
		if err := os.WriteFile(release, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		hits := 0
		for _, k := range keys {
			a := h.terminal(k, phase.Succeeded, time.Minute)
			switch core.CatalogCacheStatus(a.CacheStatus) {
			case core.CatalogCacheStatus_CACHE_HIT:
				hits++
				if _, err := os.Stat(filepath.Join(h.workDir, "_", "p", "development", k.RunName)); !os.IsNotExist(err) {
					t.Errorf("%s is a cache hit, yet it has an attempt directory (%v)", k.RunName, err)
				}
			case core.CatalogCacheStatus_CACHE_POPULATED:
				if r := ran(); len(r) != 1 || r[0] != k.RunName {
					t.Errorf("%s populated the cache, yet the runs that executed are %v", k.RunName, r)
				}
			default:
				t.Errorf("%s: cache status %d", k.RunName, a.CacheStatus)
			}
		}
		if hits != 2 || len(ran()) != 1 {
			t.Fatalf("%d hits, executed %v: want 2 hits and one execution", hits, ran())
		}
		later := h.terminal(run("rcache4"), phase.Succeeded, time.Minute)
		if later.CacheStatus != int32(core.CatalogCacheStatus_CACHE_HIT) || len(ran()) != 1 {
			t.Fatalf("a later identical run: cache status %d, executed %v", later.CacheStatus, ran())
		}
	})
}

// runOf creates a run named name of spec (h.run names the task after the
// run; identical cached runs need one task).
func (h *harness) runOf(name string, spec *task.TaskSpec) store.ActionKey {
	h.t.Helper()
	_, err := h.state.CreateRun(h.ctx, &workflow.CreateRunRequest{
		Id:   &workflow.CreateRunRequest_RunId{RunId: &common.RunIdentifier{Project: "p", Domain: "development", Name: name}},
		Task: &workflow.CreateRunRequest_TaskSpec{TaskSpec: spec},
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return store.RunKey{Project: "p", Domain: "development", RunName: name}.Action(store.RootName)
}
