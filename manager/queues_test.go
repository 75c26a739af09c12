package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// `flyte-manager queues` lists every configured queue with its limits and
// the database's depth and in-flight counts.
func TestQueuesCommand(t *testing.T) {
	home := isolate(t)
	ctx := context.Background()
	conf := filepath.Join(t.TempDir(), "queues.yaml")
	if err := os.WriteFile(conf, []byte("queues:\n  - name: serial-1\n    maxActionConcurrency: 1\n  - name: depth-limited\n    maxDepth: 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if c := run(ctx, []string{"migrate", "--home", home}, &stdout, &stderr); c != 0 {
		t.Fatalf("migrate: exit %d: %s", c, stderr.String())
	}
	g, err := db.Open(ctx, "sqlite://"+filepath.Join(home, "flyte-manager.db"))
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(g)
	run1 := store.RunKey{Project: "flytesnacks", Domain: "development", RunName: "r1"}
	if _, err := st.Actions.CreateRun(ctx, store.NewAction{Key: run1.Action(store.RootName), RunSpec: []byte{}}); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"a", "b", "c"} {
		if _, _, err := st.Actions.CreateChild(ctx, store.NewAction{Key: run1.Action(name), ParentName: store.RootName, Queue: "depth-limited"}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if _, err := st.Actions.Update(ctx, run1.Action(name), store.AnyVersion, store.Update{Phase: phase.Running}); err != nil {
				t.Fatal(err)
			}
		}
	}
	db.Close(g)

	stdout.Reset()
	if c := run(ctx, []string{"queues", "--home", home, "--config", conf}, &stdout, &stderr); c != 0 {
		t.Fatalf("queues: exit %d: %s", c, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		`(?m)^QUEUE\s+DEPTH\s+IN-FLIGHT\s+MAX-DEPTH\s+MAX-ACTION-CONCURRENCY\s+MAX-RUN-CONCURRENCY$`,
		`(?m)^depth-limited\s+3\s+1\s+5\s+-\s+-$`,
		`(?m)^serial-1\s+0\s+0\s+-\s+1\s+-$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("output does not match %s:\n%s", want, out)
		}
	}

	stdout.Reset()
	if c := run(ctx, []string{"queues", "--home", home}, &stdout, &stderr); c != 0 || !bytes.Contains(stdout.Bytes(), []byte("no queues are configured")) {
		t.Errorf("without queues: exit %d: %s%s", c, stdout.String(), stderr.String())
	}
}
