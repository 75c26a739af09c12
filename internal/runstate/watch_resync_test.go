package runstate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/actions"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/store"
)

// hubBuffer is how many changes the hub holds for one subscriber (the test
// lowers runstate.subscriptionBuffer to it); the test makes more than that
// while its watcher is stalled, so the watcher's subscription must overflow.
const hubBuffer = 4096

// A WatchChildren watcher that stops reading while more changes arrive than
// the hub buffers for it is resynced with a new snapshot: it ends with
// exactly the final state of every child, never sends a child's phase
// twice in a row, and sends each terminal update exactly once, with its
// output_uri or error. The snapshot itself spans more than one page of
// children.
func TestWatchChildrenSlowWatcherIsResynced(t *testing.T) {
	suite(t, func(t *testing.T, e *env) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		const run = "slow"
		const existing, added = store.MaxPageSize + 100, 1100 // before the watch; while it is stalled
		runKey := store.RunKey{Project: "p", Domain: "development", RunName: run}
		runstate.SetSubscriptionLimit(e.state.Hub(), hubBuffer)
		createRun(t, e, run)
		tmpl := child(t, e, run, "a0", "template")
		if err := inParallel(existing, func(i int) error {
			return e.state.Enqueue(ctx, renamed(tmpl, fmt.Sprintf("c%04d", i)))
		}); err != nil {
			t.Fatal(err)
		}

		updates := make(chan *workflow.ActionUpdate, 1<<16) // never blocks the watcher
		stalled, release := make(chan struct{}), make(chan struct{})
		watchErr := make(chan error, 1)
		go func() {
			watchErr <- e.state.WatchChildren(ctx, runKey.Action("a0"),
				func(u *workflow.ActionUpdate) error { updates <- u; return nil },
				func() error {
					close(stalled)
					select { // the watcher reads nothing until released
					case <-release:
					case <-ctx.Done():
					}
					return nil
				})
		}()
		select {
		case <-stalled:
		case err := <-watchErr:
			t.Fatalf("watch ended before its sentinel: %v", err)
		case <-ctx.Done():
			t.Fatal("no sentinel")
		}
		if len(updates) != existing {
			t.Fatalf("snapshot sent %d updates, want one per existing child (%d)", len(updates), existing)
		}

		// The test's own subscription, read promptly: once it has seen the
		// last change, the hub has dispatched every change to the stalled
		// watcher too.
		fast := e.state.Hub().Subscribe(runstate.ForRun(runKey))
		defer fast.Close()
		dispatched := make(chan int, 1)
		final := make(chan int64, 1)
		go func() {
			n, seen, last := 0, int64(0), int64(-1)
			for last < 0 || seen < last {
				select {
				case c, ok := <-fast.C:
					if !ok {
						dispatched <- -1 // overflowed or closed
						return
					}
					n, seen = n+1, c.ResourceVersion
				case last = <-final:
				case <-ctx.Done():
					return
				}
			}
			dispatched <- n
		}()

		wantFinal := map[string]common.ActionPhase{}
		update := func(name string, u store.Update) error {
			if _, err := e.st.Actions.Update(ctx, runKey.Action(name), store.AnyVersion, u); err != nil {
				return fmt.Errorf("update %s: %w", name, err)
			}
			return nil
		}
		failure := mustMarshal(t, &core.ExecutionError{Code: "ValueError", Message: "bad input", Kind: core.ExecutionError_USER})
		for i := 0; i < existing; i++ {
			wantFinal[fmt.Sprintf("c%04d", i)] = common.ActionPhase_ACTION_PHASE_SUCCEEDED
		}
		for i := 0; i < added; i++ {
			wantFinal[fmt.Sprintf("n%04d", i)] = common.ActionPhase_ACTION_PHASE_FAILED
		}
		err := inParallel(existing, func(i int) error {
			name := fmt.Sprintf("c%04d", i)
			if err := update(name, store.Update{Phase: phase.Running}); err != nil {
				return err
			}
			return update(name, store.Update{Phase: phase.Succeeded})
		})
		if err == nil {
			err = inParallel(added, func(i int) error {
				name := fmt.Sprintf("n%04d", i)
				if err := e.state.Enqueue(ctx, renamed(tmpl, name)); err != nil {
					return err
				}
				return update(name, store.Update{Phase: phase.Failed, ErrorInfo: failure})
			})
		}
		if err != nil {
			t.Fatal(err)
		}
		rv, err := e.st.Actions.CurrentVersion(ctx)
		if err != nil {
			t.Fatal(err)
		}
		final <- rv
		var n int
		select {
		case n = <-dispatched:
		case <-ctx.Done():
			t.Fatal("the hub did not dispatch every change")
		}
		if n < 0 {
			t.Fatal("the test's own, promptly read subscription overflowed")
		}
		if n <= hubBuffer {
			t.Fatalf("only %d changes were made; the stalled watcher did not overflow", n)
		}

		close(release)
		type seen struct {
			phases   []common.ActionPhase
			terminal int
		}
		got := map[string]*seen{}
		terminal := 0
		receive := func() *workflow.ActionUpdate {
			select {
			case u := <-updates:
				return u
			case err := <-watchErr:
				t.Fatalf("watch ended: %v", err)
			case <-ctx.Done():
				t.Fatalf("%d of %d children reached a terminal update", terminal, len(wantFinal))
			}
			return nil
		}
		record := func(u *workflow.ActionUpdate) {
			s := got[u.GetActionId().GetName()]
			if s == nil {
				s = &seen{}
				got[u.GetActionId().GetName()] = s
			}
			s.phases = append(s.phases, u.GetPhase())
			if phase.FromProto(u.GetPhase()).Terminal() {
				s.terminal++
				terminal++
				checkTerminal(t, e, runKey, u)
			}
		}
		// Drain the snapshot sent before the stall.
		for len(updates) > 0 {
			record(<-updates)
		}
		for terminal < len(wantFinal) {
			record(receive())
		}
		// A marker made after every terminal update arrived: once the watcher
		// sends it, anything the resync might still repeat has been sent.
		if err := e.state.Enqueue(ctx, renamed(tmpl, "zz-end")); err != nil {
			t.Fatal(err)
		}
		for {
			u := receive()
			if u.GetActionId().GetName() == "zz-end" {
				break
			}
			record(u)
		}

		if len(got) != len(wantFinal) {
			t.Fatalf("updates for %d children, want %d", len(got), len(wantFinal))
		}
		for name, want := range wantFinal {
			s := got[name]
			if s == nil {
				t.Fatalf("%s: no update", name)
			}
			if last := s.phases[len(s.phases)-1]; last != want || s.terminal != 1 {
				t.Fatalf("%s: phases %v (%d terminal), want to end %v with one terminal update", name, s.phases, s.terminal, want)
			}
			for i := 1; i < len(s.phases); i++ {
				if s.phases[i] <= s.phases[i-1] {
					t.Fatalf("%s: phases %v repeat or go back", name, s.phases)
				}
			}
		}
	})
}

// checkTerminal fails unless a terminal update carries what the SDK reads:
// the output directory of the action's attempt, and the error of a failure.
func checkTerminal(t *testing.T, e *env, run store.RunKey, u *workflow.ActionUpdate) {
	t.Helper()
	a, err := e.st.Actions.Get(context.Background(), run.Action(u.GetActionId().GetName()))
	if err != nil {
		t.Fatal(err)
	}
	if want := runstate.OutputDir(a, a.Attempts); u.GetOutputUri() != want {
		t.Fatalf("%s %v: output_uri %q, want %q", a.Name, u.GetPhase(), u.GetOutputUri(), want)
	}
	switch u.GetPhase() {
	case common.ActionPhase_ACTION_PHASE_FAILED:
		if u.GetError().GetMessage() != "bad input" || u.GetError().GetCode() != "ValueError" {
			t.Fatalf("%s FAILED: error %v, want the recorded ValueError", a.Name, u.GetError())
		}
	case common.ActionPhase_ACTION_PHASE_SUCCEEDED:
		if u.GetError() != nil {
			t.Fatalf("%s SUCCEEDED with an error %v", a.Name, u.GetError())
		}
	}
}

// inParallel runs fn(0..n-1) on a few goroutines, as several executor
// slots would write; the calls for one i stay in order. It returns the
// first error.
func inParallel(n int, fn func(i int) error) error {
	const writers = 4
	errc := make(chan error, writers)
	for w := 0; w < writers; w++ {
		go func() {
			for i := w; i < n; i += writers {
				if err := fn(i); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	var first error
	for w := 0; w < writers; w++ {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// renamed is a copy of child action tmpl under another name.
func renamed(tmpl *actions.Action, name string) *actions.Action {
	c := proto.Clone(tmpl).(*actions.Action)
	c.ActionId.Name = name
	c.InputUri = c.GetRunOutputBase() + "/" + name + "/inputs.pb"
	return c
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
