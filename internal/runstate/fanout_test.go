package runstate_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/pgtest"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/runstate/statetest"
	"fmgr.dev/internal/store"
)

// suiteDB is suite with the database handle, for tests that watch the SQL.
func suiteDB(t *testing.T, fn func(t *testing.T, e *env, g *gorm.DB)) {
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) {
		rec := &recorder{}
		state, _, se := statetest.New(t, g, statetest.Options{}, func(*runstate.Service) *recorder { return rec })
		fn(t, &env{state: state, st: se.Store, exec: rec}, g)
	})
}

// countActionReads counts the queries of the actions table made outside a
// transaction (a watcher's reads; writers read inside theirs) from now on.
func countActionReads(t *testing.T, g *gorm.DB) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	err := g.Callback().Query().After("gorm:query").Register("test:count_action_reads", func(tx *gorm.DB) {
		if _, inTx := tx.Statement.ConnPool.(gorm.TxCommitter); !inTx && tx.Statement.Table == "actions" {
			n.Add(1)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return &n
}

// A parent's WatchChildren follows its children with the rows the hub read
// with the changes: however many changes there are, the watcher reads no
// action for them (it used to read the child once per change).
func TestWatchChildrenReadsNoActionPerChange(t *testing.T) {
	suiteDB(t, func(t *testing.T, e *env, g *gorm.DB) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		const run, children = "rows", 40
		runKey := store.RunKey{Project: "p", Domain: "development", RunName: run}
		createRun(t, e, run)
		tmpl := child(t, e, run, "a0", "template")
		for i := range children {
			if err := e.state.Enqueue(ctx, renamed(tmpl, fmt.Sprintf("c%02d", i))); err != nil {
				t.Fatal(err)
			}
		}
		reads := countActionReads(t, g)
		updates := make(chan *workflow.ActionUpdate, 4*children)
		sentinel := make(chan struct{})
		watchErr := make(chan error, 1)
		go func() {
			watchErr <- e.state.WatchChildren(ctx, runKey.Action("a0"),
				func(u *workflow.ActionUpdate) error { updates <- u; return nil },
				func() error { close(sentinel); return nil })
		}()
		select {
		case <-sentinel:
		case err := <-watchErr:
			t.Fatalf("watch ended: %v", err)
		case <-ctx.Done():
			t.Fatal("no sentinel")
		}
		for range children {
			<-updates // the snapshot
		}
		before := reads.Load()
		for i := range children {
			key := runKey.Action(fmt.Sprintf("c%02d", i))
			if _, err := e.st.Actions.Update(ctx, key, store.AnyVersion, store.Update{Phase: phase.Running}); err != nil {
				t.Fatal(err)
			}
		}
		running := map[string]bool{}
		for len(running) < children {
			select {
			case u := <-updates:
				if phase.FromProto(u.GetPhase()) != phase.Running {
					t.Fatalf("%s: update %v, want RUNNING", u.GetActionId().GetName(), u.GetPhase())
				}
				running[u.GetActionId().GetName()] = true
			case err := <-watchErr:
				t.Fatalf("watch ended: %v", err)
			case <-ctx.Done():
				t.Fatalf("%d of %d children were reported RUNNING", len(running), children)
			}
		}
		if n := reads.Load() - before; n != 0 {
			t.Fatalf("the watcher read the actions table %d times for %d changes, want none", n, children)
		}
	})
}

// The hub offers a change only to the subscribers of its run (and the
// global ones): a thousand watchers of other runs cost it nothing.
func TestHubOffersAChangeOnlyToItsRunsWatchers(t *testing.T) {
	suite(t, func(t *testing.T, e *env) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		hub := e.state.Hub()
		for i := range 1000 {
			other := store.RunKey{Project: "p", Domain: "development", RunName: fmt.Sprintf("idle%d", i)}
			var sub *runstate.Subscription
			if i%2 == 0 {
				sub = hub.Subscribe(runstate.ForRun(other))
			} else {
				sub = hub.Subscribe(runstate.ForAction(other.Action(store.RootName)))
			}
			defer sub.Close()
		}
		const run, changes = "busy", 20
		runKey := store.RunKey{Project: "p", Domain: "development", RunName: run}
		watch := hub.Subscribe(runstate.ForRun(runKey))
		defer watch.Close()
		before := hub.Stats().Offered
		createRun(t, e, run)
		tmpl := child(t, e, run, "a0", "template")
		for i := 1; i < changes; i++ {
			if err := e.state.Enqueue(ctx, renamed(tmpl, fmt.Sprintf("c%02d", i))); err != nil {
				t.Fatal(err)
			}
		}
		for got := 0; got < changes; got++ {
			select {
			case c, ok := <-watch.C:
				if !ok {
					t.Fatal("the watcher's subscription closed")
				}
				if c.Key.RunKey != runKey || c.Action == nil || c.Action.ActionKey != c.Key {
					t.Fatalf("change %+v: not of the run, or without its row", c)
				}
			case <-ctx.Done():
				t.Fatalf("%d of %d changes delivered", got, changes)
			}
		}
		if n := hub.Stats().Offered - before; n != changes {
			t.Fatalf("the hub matched %d changes against subscribers %d times, want %d (once each, to its run's one watcher)", changes, n, changes)
		}
	})
}

// Two managers' hubs on one PostgreSQL database: a change committed through
// one is delivered to a watcher on the other by the database's
// notification, not by the other's poll (set to an hour here, so only a
// notification can bring it), also after the listener's connection was
// killed and came back.
func TestOtherReplicaHearsCommitsByNotification(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dsn := pgtest.NewDatabase(t)
	ga := dbtest.Migrated(t, dsn)
	gb := dbtest.Migrated(t, dsn) // the other replica's own pool
	rec := &recorder{}
	state, _, se := statetest.New(t, ga, statetest.Options{}, func(*runstate.Service) *recorder { return rec })
	a := &env{state: state, st: se.Store, exec: rec}

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	hubB := runstate.NewHub(store.New(gb).Actions, log, runstate.WithFallbackPoll(time.Hour))
	if err := hubB.Start(ctx); err != nil {
		t.Fatal(err)
	}
	runDone := make(chan struct{})
	go func() { defer close(runDone); _ = hubB.Run(ctx) }()
	defer func() { cancel(); <-runDone }()

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case <-ctx.Done():
				t.Fatalf("timed out waiting until %s", what)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	const run = "far"
	runKey := store.RunKey{Project: "p", Domain: "development", RunName: run}
	sub := hubB.Subscribe(runstate.ForRun(runKey))
	defer sub.Close()
	receive := func(name string) store.Change {
		t.Helper()
		for {
			select {
			case c, ok := <-sub.C:
				if !ok {
					t.Fatal("the watcher's subscription on the other replica closed")
				}
				if c.Key.Name == name {
					if c.Action == nil || c.Action.ActionKey != c.Key || c.Action.ResourceVersion < c.ObjectResourceVersion {
						t.Fatalf("change %+v came without its row", c)
					}
					return c
				}
			case <-ctx.Done():
				t.Fatalf("the other replica never delivered the change of %s", name)
			}
		}
	}
	// commit makes a change through replica A and checks that B's watcher
	// got it from a notification. B is listening and has dispatched since
	// it connected (its poll timer now runs for an hour).
	commit := func(name string) {
		t.Helper()
		before := hubB.Stats()
		if name == store.RootName {
			createRun(t, a, run)
		} else if err := a.state.Enqueue(ctx, renamed(child(t, a, run, "a0", "template"), name)); err != nil {
			t.Fatal(err)
		}
		receive(name)
		after := hubB.Stats()
		if after.Polled != before.Polled || after.Notified <= before.Notified {
			t.Fatalf("the change of %s reached the other replica with stats %+v (before %+v), want by notification", name, after, before)
		}
	}

	waitFor("the other replica listens", hubB.Listening)
	createRun(t, a, run) // the first change after connecting may ride the catch-up dispatch
	receive(store.RootName)
	commit("c1")
	commit("c2")

	// The listener's connection dies: B polls every second until it is
	// back, then hears again.
	if err := ga.Exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND pid <> pg_backend_pid()").Error; err != nil {
		t.Fatal(err)
	}
	waitFor("the listener notices it lost its connection", func() bool { return !hubB.Listening() })
	waitFor("the listener reconnects", hubB.Listening)
	if err := a.state.Enqueue(ctx, renamed(child(t, a, run, "a0", "template"), "c3")); err != nil {
		t.Fatal(err)
	}
	receive("c3") // by the catch-up dispatch, a notification or the one-second poll
	commit("c4")

	// The same, as the manager's metrics show it.
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(hubB)
	if got := gauge(t, reg, "flyte_manager_hub_listening", ""); got != 1 {
		t.Fatalf("flyte_manager_hub_listening = %v, want 1", got)
	}
	if got, want := gauge(t, reg, "flyte_manager_hub_changes_total", "notification"), hubB.Stats().Notified; got != float64(want) || want == 0 {
		t.Fatalf("flyte_manager_hub_changes_total{woken_by=notification} = %v, want %d", got, want)
	}
	if got := gauge(t, reg, "flyte_manager_hub_subscribers", ""); got != 1 {
		t.Fatalf("flyte_manager_hub_subscribers = %v, want 1 (the watcher)", got)
	}
}

// gauge is the value of metric name in reg (the series whose label
// woken_by is label, when label is not "").
func gauge(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if label != "" && (len(m.GetLabel()) != 1 || m.GetLabel()[0].GetValue() != label) {
				continue
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s %s", name, label)
	return 0
}
