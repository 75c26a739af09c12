package queues

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"fmgr.dev/internal/config"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// The metrics report every configured queue's limits, and its depth and
// in-flight count as the database has them.
func TestCollector(t *testing.T) {
	ctx := context.Background()
	st := store.New(dbtest.Migrated(t, dbtest.SQLiteDSN(t)))
	run := store.RunKey{Project: "p", Domain: "development", RunName: "r1"}
	if _, err := st.Actions.CreateRun(ctx, store.NewAction{Key: run.Action(store.RootName), Queue: "serial-1"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		if _, _, err := st.Actions.CreateChild(ctx, store.NewAction{Key: run.Action(name), ParentName: store.RootName, Queue: "serial-1"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Actions.Update(ctx, run.Action("a"), store.AnyVersion, store.Update{Phase: phase.Running}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Actions.Update(ctx, run.Action("b"), store.AnyVersion, store.Update{Phase: phase.Succeeded}); err != nil {
		t.Fatal(err)
	}
	set := New([]config.Queue{{Name: "serial-1", MaxActionConcurrency: 1}, {Name: "idle", MaxDepth: 5}})
	c := NewCollector(set, st.Actions, slog.New(slog.NewTextHandler(io.Discard, nil)))
	want := `
# HELP flyte_manager_queue_depth Actions on the named queue that have not ended (queued, waiting and running), from the database.
# TYPE flyte_manager_queue_depth gauge
flyte_manager_queue_depth{queue="idle"} 0
flyte_manager_queue_depth{queue="serial-1"} 2
# HELP flyte_manager_queue_in_flight Actions on the named queue whose attempt started (initializing or running), from the database.
# TYPE flyte_manager_queue_in_flight gauge
flyte_manager_queue_in_flight{queue="idle"} 0
flyte_manager_queue_in_flight{queue="serial-1"} 1
# HELP flyte_manager_queue_limit The named queue's configured limits (maxActionConcurrency, maxRunConcurrency, maxDepth); 0 means unlimited.
# TYPE flyte_manager_queue_limit gauge
flyte_manager_queue_limit{limit="maxActionConcurrency",queue="idle"} 0
flyte_manager_queue_limit{limit="maxActionConcurrency",queue="serial-1"} 1
flyte_manager_queue_limit{limit="maxDepth",queue="idle"} 5
flyte_manager_queue_limit{limit="maxDepth",queue="serial-1"} 0
flyte_manager_queue_limit{limit="maxRunConcurrency",queue="idle"} 0
flyte_manager_queue_limit{limit="maxRunConcurrency",queue="serial-1"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
