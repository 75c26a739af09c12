package attempt_test

import (
	"testing"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/store"
)

// Cache poisoning across projects and domains (issue #21): two projects
// share a task name and cache version, so their runs on the same inputs
// have the same cache key. Under the SDK's default GLOBAL lookup scope:
//   - by default a run never hits another project's entry;
//   - a run's own project's entry beats another project's newer one, also
//     with cache.crossProjectLookup on;
//   - with it on, a project without an entry hits another project's of the
//     same domain;
//   - a development entry never serves a production run, either way.
func TestCacheScopeAcrossProjects(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		token := f.hold(t)()
		c, _ := f.withCacheConfig(token, config.Default().Cache)
		cross := config.Default().Cache
		cross.CrossProjectLookup = true
		cc, _ := f.withCacheConfig(token, cross)

		tmpl := template("t.shared", &core.Container{Command: []string{"a0"}}, &core.TaskMetadata{Discoverable: true, DiscoveryVersion: "v1"})
		global := func() *task.RunSpec {
			return &task.RunSpec{CacheConfig: &task.CacheConfig{CacheLookupScope: task.CacheLookupScope_CACHE_LOOKUP_SCOPE_GLOBAL}}
		}
		// populate runs a in its own attempt (it must miss) and caches outputs.
		populate := func(c *attempt.Core, a *store.Action, outputs string) {
			t.Helper()
			p := mustPlan(t, c, a)
			if p.Launch == nil {
				t.Fatalf("run %s/%s/%s planned %+v, want a launch (a miss)", a.Project, a.Domain, a.RunName, p)
			}
			a = f.runToEnd(t, c, a, p, machine.Succeeded{Attempt: 1}, outputs)
			if a.CacheStatus != int32(core.CatalogCacheStatus_CACHE_POPULATED) {
				t.Fatalf("run %s: cache status %d, want CACHE_POPULATED", a.RunName, a.CacheStatus)
			}
		}
		// hits plans a and wants a hit reading want.
		hits := func(c *attempt.Core, a *store.Action, want string) {
			t.Helper()
			p := mustPlan(t, c, a)
			if p.Record.Cache != core.CatalogCacheStatus_CACHE_HIT || p.Launch != nil {
				t.Fatalf("run %s/%s/%s planned %+v, want a hit reading %q", a.Project, a.Domain, a.RunName, p, want)
			}
			if got := f.readOutputs(t, p.Record.OutDir); got != want {
				t.Fatalf("run %s/%s/%s hit outputs %q, want %q", a.Project, a.Domain, a.RunName, got, want)
			}
		}

		// Project a caches, then project b (by default its run misses a's
		// entry), whose entry is now the newest of the key in the org.
		populate(c, f.runIn(t, "a", "ra1", tmpl, 3, global()), "from-a")
		populate(c, f.runIn(t, "b", "rb1", tmpl, 3, global()), "from-b")
		hits(c, f.runIn(t, "a", "ra2", tmpl, 3, global()), "from-a")
		hits(cc, f.runIn(t, "a", "ra3", tmpl, 3, global()), "from-a")
		hits(c, f.runIn(t, "b", "rb3", tmpl, 3, global()), "from-b")

		// Project c has no entry: a miss by default, b's (the newest of the
		// domain) where the operator allows crossing projects.
		if p := mustPlan(t, c, f.runIn(t, "c", "rc1", tmpl, 3, global())); p.Launch == nil {
			t.Fatalf("project c's run planned %+v by default, want a miss", p)
		}
		hits(cc, f.runIn(t, "c", "rc2", tmpl, 3, global()), "from-b")

		// Production never hits a development entry, whatever the setting.
		for i, core := range []*attempt.Core{c, cc} {
			if p := mustPlan(t, core, f.runInDomain(t, "a", "production", "rprod"+string(rune('0'+i)), tmpl, 3, global())); p.Launch == nil {
				t.Fatalf("a production run planned %+v (crossProjectLookup %v), want a miss: only development entries exist", p, i == 1)
			}
		}
	})
}
