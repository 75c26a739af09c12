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
// newer row, ahead of the changes in between. These tests make the hub
// lag on purpose: it dispatches only when the test says so.

// lagging is run r1 over a hub that dispatches only when told, and a
// WatchActions of it.
type lagging struct {
	t    *testing.T
	ctx  context.Context
	e    *env
	hub  *runstate.Hub
	msgs chan []*workflow.EnrichedAction
	end  chan error
}

var r1 = store.RunKey{Project: "p", Domain: "development", RunName: "r1"}

func newLagging(t *testing.T, g *gorm.DB) *lagging {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	state, _, built := statetest.New(t, g, statetest.Options{ManualHub: true}, runstate.NoExecutor)
	l := &lagging{t: t, ctx: ctx, e: &env{state: state, st: built.Store}, hub: built.Hub}
	createRun(t, l.e, r1.RunName)
	l.dispatch()
	return l
}

func (l *lagging) dispatch() {
	l.t.Helper()
	if err := runstate.Dispatch(l.ctx, l.hub); err != nil {
		l.t.Fatal(err)
	}
}

func (l *lagging) enqueue(parent, name string) {
	l.t.Helper()
	if err := l.e.state.Enqueue(l.ctx, child(l.t, l.e, r1.RunName, parent, name)); err != nil {
		l.t.Fatal(err)
	}
}

func (l *lagging) setPhase(name string, p phase.Phase) {
	l.t.Helper()
	if _, err := l.e.st.Actions.Update(l.ctx, r1.Action(name), store.AnyVersion, store.Update{Phase: p}); err != nil {
		l.t.Fatal(err)
	}
}

// watch starts WatchActions of r1 and returns what its first message shows.
func (l *lagging) watch() map[string]common.ActionPhase {
	l.t.Helper()
	l.msgs, l.end = make(chan []*workflow.EnrichedAction, 64), make(chan error, 1)
	go func() {
		l.end <- l.e.state.WatchActions(l.ctx, r1, nil, func(b []*workflow.EnrichedAction) error {
			l.msgs <- b
			return nil
		})
	}()
	shown := map[string]common.ActionPhase{}
	for _, a := range l.receive() {
		shown[a.GetAction().GetId().GetName()] = a.GetAction().GetStatus().GetPhase()
	}
	return shown
}

func (l *lagging) receive() []*workflow.EnrichedAction {
	l.t.Helper()
	select {
	case b := <-l.msgs:
		return b
	case err := <-l.end:
		l.t.Fatalf("watch ended: %v", err)
	case <-time.After(2 * time.Minute):
		l.t.Fatal("no message from the watch")
	}
	return nil
}

const queued, running, succeeded = common.ActionPhase_ACTION_PHASE_QUEUED, common.ActionPhase_ACTION_PHASE_RUNNING, common.ActionPhase_ACTION_PHASE_SUCCEEDED

// g1's creation is still unread when its parent c1 finishes and then g1
// starts. The watch must show c1 finished before it shows g1 running,
// never g1 running under c1 still queued (which a filter by phase marks
// as c1 meeting it: the flake this pins down).
func TestWatchActionsShowsChangesInOrderWhenTheHubLags(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) {
		l := newLagging(t, g)
		l.enqueue("a0", "c1")
		l.dispatch() // the hub is past c1's creation
		l.enqueue("c1", "g1")
		shown := l.watch()
		if len(shown) != 3 || shown["a0"] != queued || shown["c1"] != queued || shown["g1"] != queued {
			t.Fatalf("first message %v, want a0, c1 and g1 queued", shown)
		}

		// The watch subscribed before g1's creation was dispatched, so that
		// change reaches it, read only now, with g1's newest row.
		l.setPhase("c1", phase.Succeeded)
		l.setPhase("g1", phase.Running)
		l.dispatch()
		for shown["c1"] != succeeded || shown["g1"] != running {
			for _, a := range l.receive() {
				shown[a.GetAction().GetId().GetName()] = a.GetAction().GetStatus().GetPhase()
			}
			if shown["g1"] == running && shown["c1"] != succeeded {
				t.Fatalf("g1 shown RUNNING under c1 shown %v: c1 finished before g1 started", shown["c1"])
			}
		}
	})
}

// c1 and its child g1 are created after the watch's first message, and c1
// starts before the hub reads c1's creation: that change waits for c1's
// next one, which comes after g1's creation. The watch shows g1 only with
// or after its parent, never under an action it has not shown.
func TestWatchActionsShowsAParentBeforeItsChildren(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) {
		l := newLagging(t, g)
		if shown := l.watch(); len(shown) != 1 {
			t.Fatalf("first message %v, want a0 alone", shown)
		}
		l.enqueue("a0", "c1")
		l.enqueue("c1", "g1")
		l.setPhase("c1", phase.Running)
		l.dispatch()
		shown := map[string]common.ActionPhase{"a0": queued}
		for shown["c1"] != running || shown["g1"] != queued {
			batch := l.receive()
			for _, a := range batch {
				shown[a.GetAction().GetId().GetName()] = a.GetAction().GetStatus().GetPhase()
			}
			for _, a := range batch {
				if parent := a.GetAction().GetMetadata().GetParent(); parent != "" {
					if _, ok := shown[parent]; !ok {
						t.Fatalf("%s shown before its parent %s", a.GetAction().GetId().GetName(), parent)
					}
				}
			}
		}
	})
}
