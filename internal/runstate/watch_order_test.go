package runstate_test

import (
	"context"
	"testing"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/runstate/statetest"
	"fmgr.dev/internal/store"
)

// The hub reads each change's action row when it reads the change, so a
// change it reads late, after its action changed again, comes with the
// newer row, ahead of the changes in between. Here the hub lags on purpose
// (the test dispatches it by hand): g1's creation is still unread when its
// parent c1 finishes and then g1 starts. A watch of the run's actions must
// show c1 finished before it shows g1 running, never g1 running under c1
// still queued (which a filter by phase marks as c1 meeting it, the flake
// this test pins down).
func TestWatchActionsShowsChangesInOrderWhenTheHubLags(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		state, _, built := statetest.New(t, g, statetest.Options{ManualHub: true}, runstate.NoExecutor)
		e := &env{state: state, st: built.Store}
		dispatch := func() {
			t.Helper()
			if err := runstate.Dispatch(ctx, built.Hub); err != nil {
				t.Fatal(err)
			}
		}
		enqueue := func(parent, name string) {
			t.Helper()
			if err := state.Enqueue(ctx, child(t, e, "r1", parent, name)); err != nil {
				t.Fatal(err)
			}
		}
		run := store.RunKey{Project: "p", Domain: "development", RunName: "r1"}
		setPhase := func(name string, p phase.Phase) {
			t.Helper()
			if _, err := e.st.Actions.Update(ctx, run.Action(name), store.AnyVersion, store.Update{Phase: p}); err != nil {
				t.Fatal(err)
			}
		}

		createRun(t, e, "r1")
		enqueue("a0", "c1")
		dispatch() // the hub is past c1's creation
		enqueue("c1", "g1")

		msgs := make(chan []*workflow.EnrichedAction, 64)
		ended := make(chan error, 1)
		go func() {
			ended <- state.WatchActions(ctx, run, nil, func(b []*workflow.EnrichedAction) error {
				msgs <- b
				return nil
			})
		}()
		receive := func() []*workflow.EnrichedAction {
			t.Helper()
			select {
			case b := <-msgs:
				return b
			case err := <-ended:
				t.Fatalf("watch ended: %v", err)
			case <-time.After(2 * time.Minute):
				t.Fatal("no message from the watch")
			}
			return nil
		}
		const queued, running, succeeded = common.ActionPhase_ACTION_PHASE_QUEUED, common.ActionPhase_ACTION_PHASE_RUNNING, common.ActionPhase_ACTION_PHASE_SUCCEEDED
		shown := map[string]common.ActionPhase{}
		for _, a := range receive() {
			shown[a.GetAction().GetId().GetName()] = a.GetAction().GetStatus().GetPhase()
		}
		if len(shown) != 3 || shown["a0"] != queued || shown["c1"] != queued || shown["g1"] != queued {
			t.Fatalf("first message %v, want a0, c1 and g1 queued", shown)
		}

		// The watch subscribed before g1's creation was dispatched, so that
		// change reaches it, read only now, with g1's newest row.
		setPhase("c1", phase.Succeeded)
		setPhase("g1", phase.Running)
		dispatch()
		for shown["c1"] != succeeded || shown["g1"] != running {
			for _, a := range receive() {
				shown[a.GetAction().GetId().GetName()] = a.GetAction().GetStatus().GetPhase()
			}
			if shown["g1"] == running && shown["c1"] != succeeded {
				t.Fatalf("g1 shown RUNNING under c1 shown %v: c1 finished before g1 started", shown["c1"])
			}
		}
	})
}
