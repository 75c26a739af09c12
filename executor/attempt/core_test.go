package attempt_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"gorm.io/gorm"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/contract"
	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/pgtest"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runlayout"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/runstate/statetest"
	"fmgr.dev/internal/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type fixture struct {
	state *runstate.Service
	g     *gorm.DB
	env   *statetest.Env
}

func each(t *testing.T, fn func(t *testing.T, f *fixture)) {
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) {
		state, _, env := statetest.New(t, g, statetest.Options{}, runstate.NoExecutor)
		fn(t, &fixture{state: state, g: g, env: env})
	})
}

// run creates a run of tmpl and returns its root action.
func (f *fixture) run(t *testing.T, name string, tmpl *core.TaskTemplate, rs *task.RunSpec) *store.Action {
	t.Helper()
	ctx := context.Background()
	id := &common.RunIdentifier{Project: "p", Domain: "development", Name: name}
	_, err := f.state.CreateRun(ctx, &workflow.CreateRunRequest{
		Id:           &workflow.CreateRunRequest_RunId{RunId: id},
		Task:         &workflow.CreateRunRequest_TaskSpec{TaskSpec: &task.TaskSpec{TaskTemplate: tmpl}},
		InputWrapper: &workflow.CreateRunRequest_Inputs{Inputs: &task.Inputs{}},
		RunSpec:      rs,
	})
	if err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	a, err := f.state.Get(ctx, store.RunKey{Project: "p", Domain: "development", RunName: name}.Action(store.RootName))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// hold takes the executor lease and returns its fence.
func (f *fixture) hold(t *testing.T) func() int64 {
	t.Helper()
	ctx := context.Background()
	st := f.env.Store
	free, err := st.Leases.Get(ctx, store.LocalExecutorLease)
	if err != nil {
		t.Fatal(err)
	}
	held, err := st.Leases.Acquire(ctx, *free, store.Claimant{Holder: "test"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return func() int64 { return held.Token }
}

func template(name string, c *core.Container, md *core.TaskMetadata) *core.TaskTemplate {
	t := &core.TaskTemplate{
		Id:        &core.Identifier{ResourceType: core.ResourceType_TASK, Project: "p", Domain: "development", Name: name, Version: "v1"},
		Type:      "python",
		Interface: &core.TypedInterface{},
		Metadata:  md,
	}
	t.Target = &core.TaskTemplate_Container{Container: c}
	return t
}

// Planning turns an action into a launch with the contract's argv and
// environment, or into the event to record instead, in one order for every
// driver: spec, limits, cache, secrets.
func TestPlan(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		args := &core.Container{Command: []string{"a0"}, Args: []string{"--inputs", "{{.input}}", "--outputs-path", "{{.outputPrefix}}", "--raw", "{{.rawOutputDataPrefix}}"},
			Env: []*core.KeyValuePair{{Key: "TASK_VAR", Value: "t"}}}
		rs := &task.RunSpec{Envs: &task.Envs{Values: []*core.KeyValuePair{{Key: "RUN_VAR", Value: "r"}}}, MaxActionConcurrency: 3}
		opts := attempt.PlanOptions{Endpoint: "10.0.0.1:8090", NoContainer: "only containers here"}

		for _, tc := range []struct {
			name  string
			tmpl  *core.TaskTemplate
			hooks attempt.Options
			check func(t *testing.T, a *store.Action, p attempt.Plan)
		}{{
			name: "container task",
			tmpl: template("t.ok", args, &core.TaskMetadata{Timeout: durationpb.New(time.Minute)}),
			check: func(t *testing.T, a *store.Action, p attempt.Plan) {
				l := p.Launch
				if p.Event != nil || l == nil {
					t.Fatalf("plan %+v, want a launch", p)
				}
				out := runlayout.AttemptDir(a.RunOutputBase, "a0", 1)
				if l.OutDir != out || l.OutDir != runstate.OutputDir(a, 1) {
					t.Fatalf("out dir %q, want %q", l.OutDir, out)
				}
				want := []string{"a0", "--inputs", runlayout.InputFile(a.InputURI), "--outputs-path", out, "--raw", out + "/raw"}
				if !slices.Equal(l.Args, want) {
					t.Fatalf("args %q\nwant %q", l.Args, want)
				}
				for k, v := range map[string]string{"TASK_VAR": "t", "RUN_VAR": "r", contract.EnvEndpoint: "10.0.0.1:8090",
					contract.EnvRunName: a.RunName, contract.EnvAttempt: "0", contract.EnvProject: "p"} {
					if got, _ := l.Env.Get(k); got != v {
						t.Errorf("env %s = %q, want %q", k, got, v)
					}
				}
				if _, ok := l.Env.Get("HOME"); ok {
					t.Error("no host environment was given, yet HOME is set")
				}
				if l.Timeout != time.Minute || l.TimeoutCode != machine.CodeMaxRuntime || l.ConcurrencyLimit != 3 {
					t.Errorf("timeout %s (%s), limit %d", l.Timeout, l.TimeoutCode, l.ConcurrencyLimit)
				}
			},
		}, {
			name: "no command",
			tmpl: template("t.plugin", &core.Container{}, nil),
			check: func(t *testing.T, _ *store.Action, p attempt.Plan) {
				f, ok := p.Event.(machine.Failed)
				if p.Launch != nil || !ok || f.Code != attempt.CodeUnsupportedTask || f.Kind != machine.KindUser ||
					!strings.Contains(f.Message, "only containers here") {
					t.Fatalf("plan %+v, want an UnsupportedTaskType failure naming the driver's reason", p)
				}
			},
		}, {
			name: "deadline passed",
			tmpl: template("t.late", args, &core.TaskMetadata{Timeouts: &core.TimeoutStrategy{Deadline: durationpb.New(time.Nanosecond)}}),
			check: func(t *testing.T, _ *store.Action, p attempt.Plan) {
				if to, ok := p.Event.(machine.TimedOut); !ok || to.Code != machine.CodeDeadline {
					t.Fatalf("plan %+v, want a deadline timeout", p)
				}
			},
		}} {
			t.Run(tc.name, func(t *testing.T) {
				a := f.run(t, "r"+strings.ReplaceAll(tc.name, " ", ""), tc.tmpl, rs)
				c := attempt.New(f.state, tc.hooks)
				p, err := c.Plan(ctx, a, opts)
				if err != nil {
					t.Fatal(err)
				}
				tc.check(t, a, p)
			})
		}
	})
}

// Apply is the one way an executor records: the machine decides, the store
// keeps it under the writer's fence, and watchers are woken; without the
// fence nothing is written.
func TestApply(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		a := f.run(t, "rapply", template("t.apply", &core.Container{Args: []string{"a0"}}, &core.TaskMetadata{Retries: &core.RetryStrategy{Retries: 1}}), nil)
		var fence int64
		c := attempt.New(f.state, attempt.Options{SystemRetries: 1, Fence: func() int64 { return fence }})

		if _, _, err := c.Apply(ctx, a, nil, machine.Start{Attempt: 1}, attempt.Record{}); !errors.Is(err, attempt.ErrNotWriter) {
			t.Fatalf("apply without the fence: %v, want ErrNotWriter", err)
		}
		if got, _ := f.state.Get(ctx, a.ActionKey); got.Phase != phase.Queued || got.ResourceVersion != a.ResourceVersion {
			t.Fatalf("without the fence the action changed: %v", got.Phase)
		}

		fence = f.hold(t)()
		sub := f.state.Hub().Subscribe(runstate.ForAction(a.ActionKey))
		defer sub.Close()
		spec, err := c.Spec(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		a, _, err = c.Apply(ctx, a, spec, machine.Start{Attempt: 1}, attempt.Record{})
		if err != nil || a.Phase != phase.Initializing {
			t.Fatalf("start: %v %v", a, err)
		}
		select {
		case ch := <-sub.C:
			if ch.Key != a.ActionKey {
				t.Fatalf("notified of %v", ch.Key)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("watchers were not notified of the write")
		}
		// A recoverable user failure retries within the task's retries...
		a, dec, err := c.Apply(ctx, a, spec, machine.Failed{Attempt: 1, Kind: machine.KindUser, Recoverable: true, Code: "E", Message: "m"}, attempt.Record{})
		if _, retry := dec.(*machine.Retry); err != nil || !retry || a.Phase != phase.Queued || a.Attempts != 2 {
			t.Fatalf("first failure: %v %v %v", dec, a, err)
		}
		// ...and the second ends the action: the budget is read from the store.
		a, _, err = c.Apply(ctx, a, spec, machine.Start{Attempt: 2}, attempt.Record{})
		if err != nil {
			t.Fatal(err)
		}
		a, dec, err = c.Apply(ctx, a, spec, machine.Failed{Attempt: 2, Kind: machine.KindUser, Recoverable: true, Code: "E", Message: "m"}, attempt.Record{})
		if term, ok := dec.(*machine.Terminal); err != nil || !ok || term.Phase != phase.Failed || a.Phase != phase.Failed {
			t.Fatalf("second failure: %v %v %v", dec, a, err)
		}
	})
}
