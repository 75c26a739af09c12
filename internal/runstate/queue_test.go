package runstate_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"gorm.io/gorm"

	"fmgr.dev/gen/go/flyteidl2/actions"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/runstate/statetest"
	"fmgr.dev/internal/store"
)

// Routing at submit: a run is on its RunSpec.queue; a child on the queue
// its TaskAction names, else its run's; an unknown queue is refused with
// InvalidArgument naming it and the known ones, writing nothing; a full
// queue refuses with ErrTooLarge (RESOURCE_EXHAUSTED).
func TestQueueRouting(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) {
		ctx := context.Background()
		rec := &recorder{}
		state, _, se := statetest.New(t, g, statetest.Options{Queues: []config.Queue{
			{Name: "runs-1", MaxRunConcurrency: 1}, {Name: "serial-1", MaxActionConcurrency: 1}, {Name: "depth-2", MaxDepth: 2},
		}}, func(*runstate.Service) *recorder { return rec })
		e := &env{state: state, st: se.Store, exec: rec}
		runOn := func(name, queue string) error {
			_, err := e.state.CreateRun(ctx, &workflow.CreateRunRequest{
				Id:      &workflow.CreateRunRequest_RunId{RunId: runID(name)},
				Task:    &workflow.CreateRunRequest_TaskSpec{TaskSpec: spec("env.main")},
				RunSpec: &task.RunSpec{Queue: queue},
			})
			return err
		}
		queueOf := func(run, name string) string {
			t.Helper()
			a, err := e.st.Actions.Get(ctx, store.RunKey{Project: "p", Domain: "development", RunName: run}.Action(name))
			if err != nil {
				t.Fatal(err)
			}
			return a.Queue
		}
		onQueue := func(a *actions.Action, queue string) *actions.Action {
			a.GetTask().Queue = queue
			return a
		}

		if err := runOn("r1", "runs-1"); err != nil {
			t.Fatal(err)
		}
		if q := queueOf("r1", store.RootName); q != "runs-1" {
			t.Errorf("root on %q, want runs-1", q)
		}
		if err := e.state.Enqueue(ctx, child(t, e, "r1", store.RootName, "inherits")); err != nil {
			t.Fatal(err)
		}
		if err := e.state.Enqueue(ctx, onQueue(child(t, e, "r1", store.RootName, "own"), "serial-1")); err != nil {
			t.Fatal(err)
		}
		if q := queueOf("r1", "inherits"); q != "runs-1" {
			t.Errorf("child without a queue on %q, want its run's runs-1", q)
		}
		if q := queueOf("r1", "own"); q != "serial-1" {
			t.Errorf("child naming serial-1 on %q", q)
		}

		err := e.state.Enqueue(ctx, onQueue(child(t, e, "r1", store.RootName, "typo"), "seral-1"))
		if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), `action.task.queue: unknown queue "seral-1": the configured queues are "depth-2", "runs-1", "serial-1"`) {
			t.Errorf("child on an unknown queue: %v", err)
		}
		if _, gerr := e.st.Actions.Get(ctx, store.RunKey{Project: "p", Domain: "development", RunName: "r1"}.Action("typo")); !errors.Is(gerr, errs.ErrNotFound) {
			t.Errorf("the refused child was written: %v", gerr)
		}
		if err := runOn("r2", "nope"); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), `run_spec.queue: unknown queue "nope"`) {
			t.Errorf("run on an unknown queue: %v", err)
		}

		// depth-2: the run's root and one child fill it.
		if err := runOn("r3", "depth-2"); err != nil {
			t.Fatal(err)
		}
		if err := e.state.Enqueue(ctx, child(t, e, "r3", store.RootName, "c1")); err != nil {
			t.Fatal(err)
		}
		err = e.state.Enqueue(ctx, child(t, e, "r3", store.RootName, "c2"))
		if !errors.Is(err, errs.ErrTooLarge) || !strings.Contains(err.Error(), `queue "depth-2" is full`) {
			t.Errorf("third action on a depth-2 queue: %v", err)
		}
		if err := runOn("r4", "depth-2"); !errors.Is(err, errs.ErrTooLarge) {
			t.Errorf("run on a full queue: %v", err)
		}
	})
}
