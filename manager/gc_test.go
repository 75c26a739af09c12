package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/store"
)

// `flyte-manager gc pin|pins|unpin` and `gc --dry-run`: a pin names its run
// and reason, a missing run or a missing flag is refused, and the dry run
// reports without deleting. (What gc deletes: internal/retention and
// e2e TestRetention.)
func TestGCCommands(t *testing.T) {
	home := isolate(t)
	ctx := context.Background()
	var stdout, stderr bytes.Buffer
	gc := func(wantOK bool, args ...string) string {
		t.Helper()
		stdout.Reset()
		stderr.Reset()
		c := run(ctx, append([]string{"gc", "--home", home}, args...), &stdout, &stderr)
		if (c == 0) != wantOK {
			t.Fatalf("gc %q: exit %d: %s%s", args, c, stdout.String(), stderr.String())
		}
		return stdout.String() + stderr.String()
	}
	if c := run(ctx, []string{"migrate", "--home", home}, &stdout, &stderr); c != 0 {
		t.Fatalf("migrate: exit %d: %s", c, stderr.String())
	}
	g, err := db.Open(ctx, "sqlite://"+filepath.Join(home, "flyte-manager.db"))
	if err != nil {
		t.Fatal(err)
	}
	key := store.RunKey{Project: "p", Domain: "development", RunName: "r1"}
	if _, err := store.New(g).Actions.CreateRun(ctx, store.NewAction{Key: key.Action(store.RootName), ActionType: store.ActionTypeTask,
		Task: store.TaskID{Project: "p", Domain: "development", Name: "env.main", Version: "v1"}, Spec: []byte("spec")}); err != nil {
		t.Fatal(err)
	}
	db.Close(g)

	if out := gc(true, "pin", "r1", "--project", "p", "--domain", "development", "--reason", "the audit"); !strings.Contains(out, "pinned run /p/development/r1") {
		t.Errorf("pin printed %q", out)
	}
	if out := gc(true, "pins"); !strings.Contains(out, "/p/development/r1") || !strings.Contains(out, "the audit") {
		t.Errorf("pins printed %q", out)
	}
	if out := gc(false, "pin", "nope", "--project", "p", "--domain", "development"); !strings.Contains(out, "not found") {
		t.Errorf("pin of a missing run printed %q", out)
	}
	if out := gc(false, "pin", "r1"); !strings.Contains(out, "--project and --domain are required") {
		t.Errorf("pin without a project printed %q", out)
	}
	if out := gc(true, "--dry-run"); !strings.Contains(out, "would delete 0 runs") {
		t.Errorf("dry run printed %q", out)
	}
	if out := gc(true, "unpin", "r1", "--project", "p", "--domain", "development"); !strings.Contains(out, "unpinned run /p/development/r1") {
		t.Errorf("unpin printed %q", out)
	}
	if out := gc(true, "pins"); strings.Contains(out, "r1") {
		t.Errorf("pins after unpin printed %q", out)
	}
}
