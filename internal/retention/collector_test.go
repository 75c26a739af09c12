package retention_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/db"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/pgtest"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/retention"
	"fmgr.dev/internal/runlayout"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/runstate/statetest"
	"fmgr.dev/internal/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// world is a manager's data: a run state over a real database, its blob
// store and a local executor's work dir.
type world struct {
	t       *testing.T
	g       *gorm.DB
	state   *runstate.Service
	st      *store.Store
	blobs   *blob.Store
	workDir string
}

func newWorld(t *testing.T, g *gorm.DB) *world {
	state, _, env := statetest.New(t, g, statetest.Options{}, runstate.NoExecutor)
	return &world{t: t, g: g, state: state, st: env.Store, blobs: env.Blobs, workDir: t.TempDir()}
}

func key(run string) store.RunKey {
	return store.RunKey{Project: "p", Domain: "development", RunName: run}
}

// create makes run `name` of task `taskName` whose code bundle is bundle
// (a key in storage) and whose input x is x, gives its root attempt 1 an
// output, a report and a work directory with a log, and returns its base.
func (w *world) create(name, taskName, bundle string, x int64) string {
	t := w.t
	t.Helper()
	ctx := context.Background()
	if ok, _ := w.blobs.Exists(ctx, bundle); !ok {
		if err := w.blobs.Put(ctx, bundle, []byte("bundle of "+bundle), nil); err != nil {
			t.Fatal(err)
		}
	}
	sp := &task.TaskSpec{TaskTemplate: &core.TaskTemplate{
		Id:        &core.Identifier{ResourceType: core.ResourceType_TASK, Project: "p", Domain: "development", Name: taskName, Version: "v1"},
		Type:      "python",
		Interface: &core.TypedInterface{},
		Target: &core.TaskTemplate_Container{Container: &core.Container{
			Args: []string{"a0", "--inputs", "{{.input}}", "--tgz", w.blobs.URI(bundle), "--dest", "."},
		}},
	}}
	_, err := w.state.CreateRun(ctx, &workflow.CreateRunRequest{
		Id:   &workflow.CreateRunRequest_RunId{RunId: &common.RunIdentifier{Project: "p", Domain: "development", Name: name}},
		Task: &workflow.CreateRunRequest_TaskSpec{TaskSpec: sp},
		InputWrapper: &workflow.CreateRunRequest_Inputs{Inputs: &task.Inputs{Literals: []*task.NamedLiteral{{
			Name: "x", Value: &core.Literal{Value: &core.Literal_Scalar{Scalar: &core.Scalar{Value: &core.Scalar_Primitive{Primitive: &core.Primitive{Value: &core.Primitive_Integer{Integer: x}}}}}},
		}}}},
	})
	if err != nil {
		t.Fatalf("CreateRun %s: %v", name, err)
	}
	root, err := w.st.Actions.Get(ctx, key(name).Action(store.RootName))
	if err != nil {
		t.Fatal(err)
	}
	base, err := w.blobs.Key(root.RunOutputBase)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"a0/1/outputs.pb", "a0/1/report.html", "a0/2/error.pb"} {
		if err := w.blobs.Put(ctx, base+"/"+f, []byte(name+" "+f), nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"1", "2"} {
		dir := filepath.Join(w.workDir, "_", "p", "development", name, "a0", n)
		if err := os.MkdirAll(filepath.Join(dir, "work"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "attempt.log"), []byte("log of "+name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return base
}

// end makes every action of run end (SUCCEEDED) at `at`.
func (w *world) end(run string, at time.Time) {
	w.t.Helper()
	if err := w.g.Exec(`UPDATE actions SET phase = ?, ended_at = ? WHERE run_name = ?`, int(phase.Succeeded), db.Time(at), run).Error; err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) count(sql string, args ...any) int64 {
	w.t.Helper()
	var n int64
	if err := w.g.Raw(sql, args...).Scan(&n).Error; err != nil {
		w.t.Fatal(err)
	}
	return n
}

// files lists the regular files under dir.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func policy() config.Retention {
	return config.Retention{
		Default:    "720h",
		Rules:      []config.RetentionRule{{Project: "keep*", Keep: "forever"}, {Domain: "production", Keep: "8760h"}},
		InputGrace: 24 * time.Hour,
		BatchSize:  2, // several batches
	}
}

// A run past its retention goes with every row and byte it owned, while
// the output a cache entry points at, a running run, a pinned run, a code
// bundle and inputs another run still uses all stay; a dry run deletes
// nothing.
func TestCollectRuns(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) {
		ctx := context.Background()
		w := newWorld(t, g)
		now := time.Now()
		old := now.Add(-800 * time.Hour)
		const bundleA, bundleS = "uploads/_/p/development/AAAA/fastA.tar.gz", "uploads/_/p/development/SSSS/fastS.tar.gz"
		const bundleG = "uploads/_/p/development/GGGG/fastG.tar.gz"

		baseA := w.create("ra", "env.a", bundleA, 7) // expired: goes; rf still uses bundleA
		w.create("rg", "env.g", bundleG, 7)          // expired: goes with bundleG
		baseD := w.create("rd", "env.d", bundleS, 7) // expired, but a cache entry points at a0/1
		w.create("re", "env.d", bundleS, 99)         // expired, inputs nobody else uses
		baseB := w.create("rb", "env.b", bundleS, 7) // running: stays
		baseC := w.create("rc", "env.c", bundleS, 7) // pinned: stays
		baseF := w.create("rf", "env.a", bundleA, 7) // ended recently: stays
		for _, r := range []string{"ra", "rd", "re", "rg", "rc"} {
			w.end(r, old)
		}
		w.end("rf", now.Add(-time.Hour))
		if err := w.st.Retention.Pin(ctx, key("rc"), "test", "keep it"); err != nil {
			t.Fatal(err)
		}
		if err := w.st.Retention.Pin(ctx, key("nope"), "test", ""); !errors.Is(err, errs.ErrNotFound) {
			t.Fatalf("pin of a missing run: %v, want NotFound", err)
		}
		// The entry names the directory by its file:// URL, the run by its
		// path: a reference in any of a location's forms counts.
		cachedDir := "file://" + w.blobs.URI(baseD+"/a0/1")
		if err := g.Exec(`INSERT INTO cache_outputs (org, project, domain, cache_key, output_uri, task_name, created_at, updated_at) VALUES ('', 'p', 'development', 'k1', ?, 'env.d', ?, ?)`,
			cachedDir, db.Now(), db.Now()).Error; err != nil {
			t.Fatal(err)
		}
		raIDs := w.count(`SELECT COUNT(*) FROM actions WHERE run_name = 'ra'`)
		if raIDs == 0 {
			t.Fatal("run ra has no actions")
		}
		reInput, err := w.st.Actions.Get(ctx, key("re").Action(store.RootName))
		if err != nil {
			t.Fatal(err)
		}
		reInputKey, err := w.blobs.Key(reInput.InputURI)
		if err != nil {
			t.Fatal(err)
		}
		sharedInput, _ := w.st.Actions.Get(ctx, key("rb").Action(store.RootName))
		sharedInputKey, _ := w.blobs.Key(sharedInput.InputURI)

		c := retention.New(w.st, w.blobs, policy(), func(k store.RunKey) (string, error) {
			return filepath.Join(w.workDir, "_", k.Project, k.Domain, k.RunName), nil
		}, nil)
		// Inputs are written now; the collector's clock is two days on, so
		// they are past the grace period.
		c.SetClock(func() time.Time { return now.Add(48 * time.Hour) })

		before := w.count(`SELECT COUNT(*) FROM actions`)
		dry, err := c.Collect(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		if dry.Runs != 4 || dry.Objects != 10 || dry.Bytes == 0 || dry.Dirs != 7 || dry.Kept != 2 {
			t.Fatalf("dry run = %+v, want 4 runs, 10 objects, bytes, 7 attempt dirs and 2 kept objects", dry)
		}
		if n := w.count(`SELECT COUNT(*) FROM actions`); n != before {
			t.Fatalf("dry run deleted actions: %d -> %d", before, n)
		}
		if ok, _ := w.blobs.Exists(ctx, baseA+"/a0/1/outputs.pb"); !ok {
			t.Fatal("dry run deleted an object")
		}
		if got := files(t, filepath.Join(w.workDir, "_", "p", "development", "ra")); len(got) != 2 {
			t.Fatalf("dry run touched the work dir: %v", got)
		}

		rep, err := c.Collect(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Runs != 4 || rep.Bundles != 1 || rep.Inputs != 1 || rep.Kept != 2 || rep.Dirs != 7 {
			t.Fatalf("collect = %+v, want 4 runs, 1 bundle, 1 input dir, 2 kept objects, 7 attempt dirs", rep)
		}
		for _, run := range []string{"ra", "rd", "re", "rg"} {
			for _, q := range []string{
				`SELECT COUNT(*) FROM actions WHERE run_name = ?`,
				`SELECT COUNT(*) FROM change_log WHERE run_name = ?`,
			} {
				if n := w.count(q, run); n != 0 {
					t.Errorf("%s: %q = %d rows left", run, q, n)
				}
			}
			if _, err := w.state.Get(ctx, key(run).Action(store.RootName)); !errors.Is(err, errs.ErrNotFound) {
				t.Errorf("Get %s after collection: %v, want NotFound", run, err)
			}
		}
		// Attempts and events of deleted actions: none are orphaned.
		for _, tbl := range []string{"action_attempts", "action_events"} {
			if n := w.count(`SELECT COUNT(*) FROM ` + tbl + ` x WHERE NOT EXISTS (SELECT 1 FROM actions a WHERE a.id = x.action_id)`); n != 0 {
				t.Errorf("%s: %d rows of deleted actions", tbl, n)
			}
		}
		if n := w.count(`SELECT COUNT(*) FROM task_specs s WHERE NOT EXISTS (SELECT 1 FROM actions a WHERE a.spec_digest = s.digest)`); n != 0 {
			t.Errorf("%d task specs nothing uses", n)
		}
		// Storage: ra's and re's prefixes are empty; rd keeps the cached
		// attempt directory only.
		root := w.blobs.URI("")
		if got := files(t, filepath.Join(root, baseA)); len(got) != 0 {
			t.Errorf("ra left %v in storage", got)
		}
		if _, err := os.Stat(filepath.Join(root, baseA)); !os.IsNotExist(err) {
			t.Errorf("ra's base directory stays: %v", err)
		}
		if got := files(t, filepath.Join(root, baseD)); len(got) != 2 || got[0] != "a0/1/outputs.pb" || got[1] != "a0/1/report.html" {
			t.Errorf("rd left %v in storage, want the cached attempt a0/1 only", got)
		}
		if ok, _ := w.blobs.Exists(ctx, bundleA); ok {
			// rf (recent) still runs env.a's spec with bundleA: it must stay.
		} else {
			t.Errorf("bundle A was deleted though run rf still uses it")
		}
		if ok, _ := w.blobs.Exists(ctx, bundleG); ok {
			t.Errorf("bundle G, which only rg used, stays")
		}
		if _, err := os.Stat(filepath.Join(root, "uploads/_/p/development/GGGG")); !os.IsNotExist(err) {
			t.Errorf("bundle G's directory stays: %v", err)
		}
		if ok, _ := w.blobs.Exists(ctx, bundleS); !ok {
			t.Errorf("bundle S was deleted though runs rb and rc use it")
		}
		if ok, _ := w.blobs.Exists(ctx, reInputKey+"/inputs.pb"); ok {
			t.Errorf("re's inputs, which nothing else uses, stay")
		}
		if ok, _ := w.blobs.Exists(ctx, sharedInputKey+"/inputs.pb"); !ok {
			t.Errorf("the inputs rb and rc share were deleted")
		}
		// Work dir: ra and re are gone; rd keeps the cached attempt.
		runs := filepath.Join(w.workDir, "_", "p", "development")
		for _, r := range []string{"ra", "re", "rg"} {
			if _, err := os.Stat(filepath.Join(runs, r)); !os.IsNotExist(err) {
				t.Errorf("attempt directories of %s stay: %v", r, err)
			}
		}
		if got := files(t, filepath.Join(runs, "rd")); len(got) != 1 || got[0] != "a0/1/attempt.log" {
			t.Errorf("rd's work dir holds %v, want the cached attempt's only", got)
		}
		// What stays, stays whole.
		for _, r := range []struct{ name, base string }{{"rb", baseB}, {"rc", baseC}, {"rf", baseF}} {
			if got := files(t, filepath.Join(root, r.base)); len(got) != 3 {
				t.Errorf("%s: storage holds %v", r.name, got)
			}
			if got := files(t, filepath.Join(runs, r.name)); len(got) != 2 {
				t.Errorf("%s: work dir holds %v", r.name, got)
			}
			if _, err := w.state.Get(ctx, key(r.name).Action(store.RootName)); err != nil {
				t.Errorf("Get %s: %v", r.name, err)
			}
		}

		// Unpinned, rc goes at the next pass, and with it the last user of
		// nothing shared: rb and rf still hold bundle S, A and the inputs.
		if err := w.st.Retention.Unpin(ctx, key("rc")); err != nil {
			t.Fatal(err)
		}
		rep, err = c.Collect(ctx, false)
		if err != nil || rep.Runs != 1 || rep.Deleted[0] != key("rc") {
			t.Fatalf("after unpin: %+v, %v; want rc deleted", rep, err)
		}
	})
}

// CreateRun writes content-addressed inputs again when they exist, so
// their age is their last use: the input sweep, which spares inputs
// younger than the grace period, never takes inputs a new run is about to
// reference.
func TestReusedInputsAreYoung(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) {
		ctx := context.Background()
		w := newWorld(t, g)
		w.create("rx", "env.a", "uploads/_/p/development/AAAA/fastA.tar.gz", 42)
		root, err := w.st.Actions.Get(ctx, key("rx").Action(store.RootName))
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(w.blobs.URI(""), mustKey(t, w.blobs, root.InputURI), "inputs.pb")
		old := time.Now().Add(-48 * time.Hour)
		if err := os.Chtimes(file, old, old); err != nil {
			t.Fatal(err)
		}
		w.create("ry", "env.a", "uploads/_/p/development/AAAA/fastA.tar.gz", 42)
		fi, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		if time.Since(fi.ModTime()) > time.Hour {
			t.Errorf("the inputs a new run reuses are %s old", time.Since(fi.ModTime()).Round(time.Hour))
		}
	})
}

func mustKey(t *testing.T, b *blob.Store, uri string) string {
	t.Helper()
	k, err := b.Key(uri)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Unreferenced content-addressed inputs are judged in batches: of five old
// directories (batch size 2), the one a run uses and the one a trigger's
// spec names stay, the three nothing names go.
func TestCollectInputsInBatches(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) {
		ctx := context.Background()
		w := newWorld(t, g)
		w.create("ra", "env.a", "uploads/_/p/development/AAAA/fastA.tar.gz", 7)
		used, err := w.st.Actions.Get(ctx, key("ra").Action(store.RootName))
		if err != nil {
			t.Fatal(err)
		}
		usedKey, err := w.blobs.Key(used.InputURI)
		if err != nil {
			t.Fatal(err)
		}
		var dirs []string
		for _, name := range []string{"o1", "o2", "o3", "trig"} {
			dir := runlayout.OffloadedInputsRoot + "/_/p/development/" + name
			if err := w.blobs.Put(ctx, dir+"/inputs.pb", []byte(name), nil); err != nil {
				t.Fatal(err)
			}
			dirs = append(dirs, dir)
		}
		trigURI := w.blobs.URI(dirs[3])
		now := time.Now()
		if err := g.Exec(`INSERT INTO triggers (org, project, domain, task_name, name, task_version, revision, active, automation_type,
 spec, automation_spec, deployed_at, updated_at, active_since) VALUES ('', 'p', 'development', 't', 'nightly', 'v1', 1, true, 'schedule', ?, ?, ?, ?, ?)`,
			[]byte("inputs at "+trigURI+"/inputs.pb"), []byte{}, now, now, now).Error; err != nil {
			t.Fatal(err)
		}
		c := retention.New(w.st, w.blobs, policy(), nil, nil)
		c.SetClock(func() time.Time { return now.Add(48 * time.Hour) }) // everything is past the grace period
		rep, err := c.Collect(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Inputs != 3 {
			t.Errorf("collected %d input directories, want 3", rep.Inputs)
		}
		for i, dir := range dirs {
			ok, _ := w.blobs.Exists(ctx, dir+"/inputs.pb")
			if want := i == 3; ok != want {
				t.Errorf("%s exists: %v, want %v", dir, ok, want)
			}
		}
		if ok, _ := w.blobs.Exists(ctx, usedKey+"/inputs.pb"); !ok {
			t.Errorf("the inputs run ra uses were deleted")
		}
	})
}
