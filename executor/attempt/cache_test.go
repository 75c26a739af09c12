package attempt_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"fmgr.dev/cache"
	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runlayout"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/store"
)

// runWith creates a run of tmpl on inputs x=v in project p and returns its
// root action.
func (f *fixture) runWith(t *testing.T, name string, tmpl *core.TaskTemplate, v int64, rs *task.RunSpec) *store.Action {
	t.Helper()
	return f.runIn(t, "p", name, tmpl, v, rs)
}

func (f *fixture) runIn(t *testing.T, project, name string, tmpl *core.TaskTemplate, v int64, rs *task.RunSpec) *store.Action {
	t.Helper()
	return f.runInDomain(t, project, "development", name, tmpl, v, rs)
}

func (f *fixture) runInDomain(t *testing.T, project, domain, name string, tmpl *core.TaskTemplate, v int64, rs *task.RunSpec) *store.Action {
	t.Helper()
	ctx := context.Background()
	in := &task.Inputs{Literals: []*task.NamedLiteral{{Name: "x", Value: &core.Literal{Value: &core.Literal_Scalar{Scalar: &core.Scalar{
		Value: &core.Scalar_Primitive{Primitive: &core.Primitive{Value: &core.Primitive_Integer{Integer: v}}}}}}}}}
	_, err := f.state.CreateRun(ctx, &workflow.CreateRunRequest{
		Id:           &workflow.CreateRunRequest_RunId{RunId: &common.RunIdentifier{Project: project, Domain: domain, Name: name}},
		Task:         &workflow.CreateRunRequest_TaskSpec{TaskSpec: &task.TaskSpec{TaskTemplate: tmpl}},
		InputWrapper: &workflow.CreateRunRequest_Inputs{Inputs: in},
		RunSpec:      rs,
	})
	if err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	a, err := f.state.Get(ctx, store.RunKey{Project: project, Domain: domain, RunName: name}.Action(store.RootName))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// writer is a core holding the executor lease, with the real output cache.
func (f *fixture) writer(t *testing.T) (*attempt.Core, *cache.Cache) {
	t.Helper()
	return f.withCache(f.hold(t)())
}

// withCache is a core with a cache of its own (what a restarted manager
// has) writing under token.
func (f *fixture) withCache(token int64) (*attempt.Core, *cache.Cache) {
	return f.withCacheConfig(token, config.Default().Cache)
}

// withCacheConfig is withCache with the cache: section cfg.
func (f *fixture) withCacheConfig(token int64, cfg config.Cache) (*attempt.Core, *cache.Cache) {
	oc := cache.New(cfg, f.g, f.env.Blobs, f.env.Store.Actions, f.env.Log)
	return attempt.New(f.state, attempt.Options{Fence: func() int64 { return token }, Hooks: attempt.Hooks{Cache: oc.Hook()}}), oc
}

func (f *fixture) outputsKey(t *testing.T, dir string) string {
	t.Helper()
	k, err := f.env.Blobs.Key(runlayout.JoinURI(dir, runlayout.OutputsFile))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (f *fixture) writeOutputs(t *testing.T, dir, outputs string) {
	t.Helper()
	if err := f.env.Blobs.Put(context.Background(), f.outputsKey(t, dir), []byte(outputs), nil); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) readOutputs(t *testing.T, dir string) string {
	t.Helper()
	b, err := f.env.Blobs.Get(context.Background(), f.outputsKey(t, dir))
	if err != nil {
		t.Fatalf("outputs in %s: %v", dir, err)
	}
	return string(b)
}

func mustPlan(t *testing.T, c *attempt.Core, a *store.Action) attempt.Plan {
	t.Helper()
	p, err := c.Plan(context.Background(), a, attempt.PlanOptions{Endpoint: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// runToEnd starts a's planned attempt and records ev as its end; a
// success writes outputs.pb holding outputs first, as a task does.
func (f *fixture) runToEnd(t *testing.T, c *attempt.Core, a *store.Action, p attempt.Plan, ev machine.Event, outputs string) *store.Action {
	t.Helper()
	ctx := context.Background()
	if p.Launch == nil {
		t.Fatalf("plan %+v, want a launch", p)
	}
	if _, ok := ev.(machine.Succeeded); ok {
		f.writeOutputs(t, p.Launch.OutDir, outputs)
	}
	a, _, err := c.Apply(ctx, a, p.Spec, machine.Start{Attempt: uint32(a.Attempts)}, attempt.Record{})
	if err != nil {
		t.Fatal(err)
	}
	if a.CacheStatus != int32(core.CatalogCacheStatus_CACHE_MISS) {
		t.Fatalf("a started attempt of a cacheable task has cache status %d, want CACHE_MISS", a.CacheStatus)
	}
	a, _, err = c.Apply(ctx, a, p.Spec, ev, attempt.Record{OutDir: p.Launch.OutDir})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// The cache step of the core: a miss runs and populates, an identical
// action then succeeds from the cache without an attempt, other inputs or
// an overwriting run miss, and a serialized task lets one action compute
// while the identical ones wait, whatever way the holder ends.
func TestCacheLifecycle(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		c, oc := f.writer(t)
		ct := &core.Container{Command: []string{"a0"}}
		md := &core.TaskMetadata{Discoverable: true, DiscoveryVersion: "v1"}
		tmpl := template("t.square", ct, md)

		first := f.runWith(t, "rfirst", tmpl, 3, nil)
		p := mustPlan(t, c, first)
		firstOut := p.Launch.OutDir
		first = f.runToEnd(t, c, first, p, machine.Succeeded{Attempt: 1}, "nine")
		if first.Phase != phase.Succeeded || first.CacheStatus != int32(core.CatalogCacheStatus_CACHE_POPULATED) {
			t.Fatalf("first run: %s, cache status %d, want SUCCEEDED and CACHE_POPULATED", first.Phase, first.CacheStatus)
		}
		second := f.runWith(t, "rsecond", tmpl, 3, nil)
		outDir := runstate.OutputDir(second, 1)
		p = mustPlan(t, c, second)
		if _, ok := p.Event.(machine.Succeeded); !ok || p.Launch != nil || p.Record.OutDir != outDir {
			t.Fatalf("identical run planned %+v, want a success with the cached outputs copied to its own %s", p, outDir)
		}
		if got := f.readOutputs(t, outDir); got != "nine" {
			t.Fatalf("the hit's outputs read %q, want the cached %q", got, "nine")
		}
		second, _, err := c.Apply(ctx, second, p.Spec, p.Event, p.Record)
		if err != nil {
			t.Fatal(err)
		}
		if second.Phase != phase.Succeeded || second.CacheStatus != int32(core.CatalogCacheStatus_CACHE_HIT) {
			t.Fatalf("identical run: %s, cache status %d, want SUCCEEDED and CACHE_HIT", second.Phase, second.CacheStatus)
		}
		atts, err := f.env.Store.Actions.Attempts(ctx, second.ActionKey)
		if err != nil || len(atts) != 1 || atts[0].OutputURI != outDir || atts[0].OwnerToken != 0 {
			t.Fatalf("the hit's attempt: %+v %v, want one, never started, with the cached output dir", atts, err)
		}
		// Each attempt's history says what the cache did for it.
		for _, run := range []struct {
			a    *store.Action
			want core.CatalogCacheStatus
		}{{first, core.CatalogCacheStatus_CACHE_POPULATED}, {second, core.CatalogCacheStatus_CACHE_HIT}} {
			d, err := f.state.Details(ctx, run.a)
			if err != nil || len(d.GetAttempts()) != 1 || d.GetAttempts()[0].GetCacheStatus() != run.want {
				t.Fatalf("details of %s: attempts %v (%v), want one with cache status %s", run.a.RunName, d.GetAttempts(), err, run.want)
			}
		}

		if p := mustPlan(t, c, f.runWith(t, "rother", tmpl, 4, nil)); p.Launch == nil {
			t.Fatalf("other inputs planned %+v, want a launch (miss)", p)
		}
		if p := mustPlan(t, c, f.runWith(t, "rover", tmpl, 3, &task.RunSpec{OverwriteCache: true})); p.Launch == nil {
			t.Fatalf("an overwrite_cache run planned %+v, want a launch", p)
		}
		if p := mustPlan(t, c, f.runWith(t, "rversion", template("t.square", ct, &core.TaskMetadata{Discoverable: true, DiscoveryVersion: "v2"}), 3, nil)); p.Launch == nil {
			t.Fatalf("a new cache version planned %+v, want a launch", p)
		}
		if es, err := oc.Repo().Purge(ctx, cache.Scope{Project: "p", Domain: "development"}, "t.square", true); err != nil || len(es) != 1 || es[0].OutputURI != firstOut {
			t.Fatalf("entries of t.square: %+v %v, want the first run's only", es, err)
		}

		// Serialized: the holder computes, the others wait, then hit.
		ser := template("t.serial", ct, &core.TaskMetadata{Discoverable: true, DiscoveryVersion: "v1", CacheSerializable: true})
		holder := f.runWith(t, "rholder", ser, 5, nil)
		ph := mustPlan(t, c, holder)
		waiter := f.runWith(t, "rwaiter", ser, 5, nil)
		pw := mustPlan(t, c, waiter)
		w, ok := pw.Event.(machine.Wait)
		if !ok || pw.RetryAfter <= 0 || !strings.Contains(w.Reason, holder.ActionKey.String()) {
			t.Fatalf("second identical serialized action planned %+v, want a wait naming the holder", pw)
		}
		if waiter, _, err = c.Apply(ctx, waiter, pw.Spec, pw.Event, pw.Record); err != nil || waiter.Phase != phase.WaitingForResources {
			t.Fatalf("waiter: %v %v, want WAITING_FOR_RESOURCES", waiter.Phase, err)
		}
		// A holder that fails releases the reservation: the waiter takes over.
		holder = f.runToEnd(t, c, holder, ph, machine.Failed{Attempt: 1, Kind: machine.KindUser, Code: "E", Message: "boom"}, "")
		if holder.Phase != phase.Failed {
			t.Fatalf("holder %s", holder.Phase)
		}
		pw = mustPlan(t, c, waiter)
		if pw.Launch == nil {
			t.Fatalf("after the holder failed the waiter planned %+v, want a launch", pw)
		}
		third := f.runWith(t, "rthird", ser, 5, nil)
		if p := mustPlan(t, c, third); p.Event == nil {
			t.Fatalf("the new holder's reservation did not hold off a third action: %+v", p)
		}
		f.runToEnd(t, c, waiter, pw, machine.Succeeded{Attempt: 1}, "twenty-five")
		if p := mustPlan(t, c, third); p.Record.Cache != core.CatalogCacheStatus_CACHE_HIT || f.readOutputs(t, p.Record.OutDir) != "twenty-five" {
			t.Fatalf("after the holder succeeded the third planned %+v, want a hit", p)
		}

		// Cached outputs that are gone from storage are computed again.
		gone := f.runWith(t, "rgone", tmpl, 3, nil)
		if err := f.env.Blobs.Delete(ctx, f.outputsKey(t, firstOut)); err != nil {
			t.Fatal(err)
		}
		if p := mustPlan(t, c, gone); p.Launch == nil {
			t.Fatalf("with the cached outputs deleted the plan is %+v, want a launch", p)
		}
		if left, err := oc.Repo().Purge(ctx, cache.Scope{Project: "p", Domain: "development"}, "t.square", true); err != nil || len(left) != 0 {
			t.Fatalf("the entry whose outputs are gone is still there: %+v %v", left, err)
		}
	})
}

// The run's and the task's cache settings: an abort releases the holder's
// reservation; the task's max_age makes an older entry miss; the run's
// cache_lookup_scope GLOBAL finds another project's entry where
// cache.crossProjectLookup allows it, PROJECT_DOMAIN does not;
// overwrite_cache replaces the entry.
func TestCacheOptions(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		cross := config.Default().Cache
		cross.CrossProjectLookup = true
		c, _ := f.withCacheConfig(f.hold(t)(), cross)
		ct := &core.Container{Command: []string{"a0"}}

		ser := template("t.serial", ct, &core.TaskMetadata{Discoverable: true, DiscoveryVersion: "v1", CacheSerializable: true})
		holder := f.runWith(t, "rholder", ser, 1, nil)
		ph := mustPlan(t, c, holder)
		if ph.Launch == nil {
			t.Fatalf("holder planned %+v", ph)
		}
		waiter := f.runWith(t, "rwaiter", ser, 1, nil)
		if p := mustPlan(t, c, waiter); p.Event == nil {
			t.Fatalf("waiter planned %+v, want a wait", p)
		}
		// Aborted before it started: the executor records the abort without
		// the spec (as the drivers do for a pending action).
		if err := f.state.Abort(ctx, holder.ActionKey, "test", ""); err != nil {
			t.Fatal(err)
		}
		holder, _ = f.state.Get(ctx, holder.ActionKey)
		if holder, _, err := c.Apply(ctx, holder, nil, machine.AbortRequested{Reason: "test"}, attempt.Record{}); err != nil || holder.Phase != phase.Aborted {
			t.Fatalf("abort: %v %v", holder, err)
		}
		if p := mustPlan(t, c, waiter); p.Launch == nil {
			t.Fatalf("after the holder was aborted the waiter planned %+v, want a launch", p)
		}

		aged := template("t.aged", ct, &core.TaskMetadata{Discoverable: true, DiscoveryVersion: "v1", CacheMaxAge: durationpb.New(time.Nanosecond)})
		a := f.runWith(t, "raged1", aged, 2, nil)
		p := mustPlan(t, c, a)
		f.runToEnd(t, c, a, p, machine.Succeeded{Attempt: 1}, "four")
		if p := mustPlan(t, c, f.runWith(t, "raged2", aged, 2, nil)); p.Launch == nil {
			t.Fatalf("an entry older than the task's max_age planned %+v, want a launch (miss)", p)
		}

		tmpl := template("t.shared", ct, &core.TaskMetadata{Discoverable: true, DiscoveryVersion: "v1"})
		a = f.runIn(t, "q", "rshared", tmpl, 3, nil)
		f.runToEnd(t, c, a, mustPlan(t, c, a), machine.Succeeded{Attempt: 1}, "nine")
		local := &task.RunSpec{CacheConfig: &task.CacheConfig{CacheLookupScope: task.CacheLookupScope_CACHE_LOOKUP_SCOPE_PROJECT_DOMAIN}}
		if p := mustPlan(t, c, f.runWith(t, "rlocal", tmpl, 3, local)); p.Launch == nil {
			t.Fatalf("PROJECT_DOMAIN scope found another project's entry: %+v", p)
		}
		global := &task.RunSpec{CacheConfig: &task.CacheConfig{CacheLookupScope: task.CacheLookupScope_CACHE_LOOKUP_SCOPE_GLOBAL}}
		p = mustPlan(t, c, f.runWith(t, "rglobal", tmpl, 3, global))
		if p.Record.Cache != core.CatalogCacheStatus_CACHE_HIT || f.readOutputs(t, p.Record.OutDir) != "nine" {
			t.Fatalf("GLOBAL scope planned %+v, want a hit on project q's entry", p)
		}

		// overwrite_cache: the lookup is skipped and the entry replaced.
		over := f.runIn(t, "q", "rover", tmpl, 3, &task.RunSpec{CacheConfig: &task.CacheConfig{OverwriteCache: true}})
		po := mustPlan(t, c, over)
		if po.Launch == nil {
			t.Fatalf("overwrite planned %+v, want a launch", po)
		}
		if over, _, err := c.Apply(ctx, over, po.Spec, machine.Start{Attempt: 1}, attempt.Record{}); err != nil ||
			over.CacheStatus != int32(core.CatalogCacheStatus_CACHE_SKIPPED) {
			t.Fatalf("overwrite start: %v %v, want CACHE_SKIPPED", over, err)
		} else {
			f.writeOutputs(t, po.Launch.OutDir, "NINE")
			over, _, err = c.Apply(ctx, over, po.Spec, machine.Succeeded{Attempt: 1}, attempt.Record{OutDir: po.Launch.OutDir})
			if err != nil || over.CacheStatus != int32(core.CatalogCacheStatus_CACHE_POPULATED) {
				t.Fatalf("overwrite end: %v %v", over, err)
			}
		}
		p = mustPlan(t, c, f.runIn(t, "q", "rafter", tmpl, 3, nil))
		if got := f.readOutputs(t, p.Record.OutDir); got != "NINE" {
			t.Fatalf("after the overwrite a hit reads %q, want %q", got, "NINE")
		}

		// Outputs that cannot be cached (the key cannot be computed: the
		// inputs went missing before a restarted manager, which has not
		// computed it yet, ends the action) are a put failure, not the
		// action's.
		lost := f.runWith(t, "rlost", tmpl, 77, nil)
		pl := mustPlan(t, c, lost)
		in, err := f.env.Blobs.Key(runlayout.InputFile(lost.InputURI))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.env.Blobs.Delete(ctx, in); err != nil {
			t.Fatal(err)
		}
		held, err := f.env.Store.Leases.Get(ctx, store.LocalExecutorLease)
		if err != nil {
			t.Fatal(err)
		}
		restarted, _ := f.withCache(held.Token)
		lost = f.runToEnd(t, restarted, lost, pl, machine.Succeeded{Attempt: 1}, "lost")
		if lost.Phase != phase.Succeeded || lost.CacheStatus != int32(core.CatalogCacheStatus_CACHE_PUT_FAILURE) {
			t.Fatalf("a success whose outputs could not be cached: %s, cache status %d, want SUCCEEDED and CACHE_PUT_FAILURE", lost.Phase, lost.CacheStatus)
		}
	})
}
