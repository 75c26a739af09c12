package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"fmgr.dev/cache"
	"fmgr.dev/internal/db"
)

// `flyte-manager cache purge`: a dry run prints what it would delete and
// deletes nothing; --task narrows to one task; the rest stays.
func TestCachePurge(t *testing.T) {
	home := isolate(t)
	ctx := context.Background()
	dsn := "sqlite://" + filepath.Join(home, "flyte-manager.db")
	var stdout, stderr bytes.Buffer
	if c := run(ctx, []string{"migrate", "--home", home}, &stdout, &stderr); c != 0 {
		t.Fatalf("migrate: exit %d: %s", c, stderr.String())
	}
	g, err := db.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	repo := cache.NewRepo(g, cache.Limits{})
	for _, e := range []cache.Entry{
		{Project: "p", Domain: "development", CacheKey: "k1", OutputURI: "file:///o/1", TaskName: "env.a"},
		{Project: "p", Domain: "development", CacheKey: "k2", OutputURI: "file:///o/2", TaskName: "env.b"},
		{Project: "p", Domain: "production", CacheKey: "k3", OutputURI: "file:///o/3", TaskName: "env.a"},
	} {
		if err := repo.Put(ctx, e, false, 0); err != nil {
			t.Fatal(err)
		}
	}
	db.Close(g)

	purge := func(args ...string) string {
		t.Helper()
		stdout.Reset()
		stderr.Reset()
		if c := run(ctx, append([]string{"cache", "purge", "--home", home}, args...), &stdout, &stderr); c != 0 {
			t.Fatalf("cache purge %q: exit %d: %s", args, c, stderr.String())
		}
		return stdout.String()
	}
	out := purge("--project", "p", "--domain", "development", "--dry-run")
	if !strings.Contains(out, "would delete p/development task=env.a key=k1") || !strings.Contains(out, "key=k2") ||
		strings.Contains(out, "k3") || !strings.Contains(out, "would delete 2 cache entries") {
		t.Fatalf("dry run printed:\n%s", out)
	}
	out = purge("--project", "p", "--domain", "development", "--task", "env.a")
	if !strings.Contains(out, "deleted 1 cache entries") || !strings.Contains(out, "key=k1") {
		t.Fatalf("purge --task printed:\n%s", out)
	}
	out = purge("--project", "p", "--domain", "development", "--dry-run")
	if !strings.Contains(out, "would delete 1 cache entries") || !strings.Contains(out, "key=k2") {
		t.Fatalf("after purging env.a (the dry run deleted nothing, so k2 stays):\n%s", out)
	}
	if c := run(ctx, []string{"cache", "purge", "--home", home, "--project", "p"}, &stdout, &stderr); c == 0 ||
		!strings.Contains(stderr.String(), "--domain") {
		t.Fatalf("purge without --domain: exit %d, %s", c, stderr.String())
	}
}
