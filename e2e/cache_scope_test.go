package e2e

import (
	"strings"
	"testing"
	"time"

	"fmgr.dev/internal/testkit"
)

// Cache poisoning across projects and domains (issue #21) through the real
// SDK: one cached task, wf_cache.where, whose output names the project and
// domain that computed it though its cache key does not, so two projects'
// runs of it on the same inputs share the key. Each run uses the SDK's
// default lookup scope (global), under the manager's default
// cache.crossProjectLookup (off). Project b's entry never serves project
// a's run, a's own entry beats b's newer one, and a development entry
// never serves a production run.
func testCacheScope(t *testing.T, m *manager) {
	ctx := scenarioContext(t, 8*time.Minute)
	dir := testkit.TaskDir(t)
	a, b, prod := testProject+"/"+testDomain, "e2e-cache-b/"+testDomain, testProject+"/production"
	steps := []struct{ scope, status, why string }{
		{a, "CACHE_POPULATED", "the first run computes"},
		{b, "CACHE_POPULATED", "project b must not hit project a's entry"},
		{a, "CACHE_HIT", "project a hits its own entry, not b's newer one"},
		{prod, "CACHE_POPULATED", "production must not hit a development entry"},
		{b, "CACHE_HIT", "project b hits its own entry"},
	}
	args := []string{"scoped", sdkEndpoint(m), dir}
	for _, s := range steps {
		args = append(args, s.scope)
	}
	var res struct {
		Runs []struct {
			cacheRun
			Project, Domain string
		}
	}
	driver(t, ctx, &res, "drive_cache.py", args...)
	if len(res.Runs) != len(steps) {
		t.Fatalf("the driver reported %d runs, want %d", len(res.Runs), len(steps))
	}
	populated := 0
	for i, s := range steps {
		r := res.Runs[i]
		if r.Phase != "SUCCEEDED" || r.ActionPhase != "SUCCEEDED" {
			t.Fatalf("run %s in %s is %s (cached action %s %s): %s", r.Run, s.scope, r.Phase, r.Action, r.ActionPhase, r.Error)
		}
		if r.Project+"/"+r.Domain != s.scope {
			t.Fatalf("step %d reported %s/%s, want %s", i, r.Project, r.Domain, s.scope)
		}
		// The output names who computed it: the run's own project and domain.
		checkJSON(t, "run "+r.Run+" in "+s.scope+" output", r.Output, `"5@`+s.scope+`"`)
		if r.CacheStatus != s.status {
			t.Errorf("run %s in %s: cache status %s, want %s: %s", r.Run, s.scope, r.CacheStatus, s.status, s.why)
		}
		if s.status == "CACHE_POPULATED" {
			populated++
			continue
		}
		// A hit starts nothing: one attempt that never initialized or ran.
		if len(r.Attempts) != 1 {
			t.Errorf("run %s in %s: the cache hit has %d attempts, want 1", r.Run, s.scope, len(r.Attempts))
		}
		for _, at := range r.Attempts {
			for _, tr := range at.Transitions {
				if tr.Phase == "INITIALIZING" || tr.Phase == "RUNNING" {
					t.Errorf("run %s in %s: the cache hit went through %s", r.Run, s.scope, tr.Phase)
				}
			}
		}
	}
	ex := executions(t, dir)
	if len(ex) != populated {
		t.Errorf("where ran %d times, want %d (once per project and domain):\n%s", len(ex), populated, strings.Join(ex, "\n"))
	}
}
