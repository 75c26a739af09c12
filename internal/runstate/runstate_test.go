package runstate_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"gorm.io/gorm"

	"fmgr.dev/gen/go/flyteidl2/actions"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/pgtest"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/runstate/statetest"
	"fmgr.dev/internal/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// recorder is a stand-in executor that remembers what it was told.
type recorder struct {
	mu               sync.Mutex
	submitted, abort []store.ActionKey
}

func (r *recorder) Submit(k store.ActionKey) {
	r.mu.Lock()
	r.submitted = append(r.submitted, k)
	r.mu.Unlock()
}
func (r *recorder) Abort(k store.ActionKey) { r.mu.Lock(); r.abort = append(r.abort, k); r.mu.Unlock() }

type env struct {
	state *runstate.Service
	st    *store.Store
	exec  *recorder
}

// suite runs fn on SQLite and on PostgreSQL.
func suite(t *testing.T, fn func(t *testing.T, e *env)) {
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) {
		rec := &recorder{}
		state, _, e := statetest.New(t, g, statetest.Options{}, func(*runstate.Service) *recorder { return rec })
		fn(t, &env{state: state, st: e.Store, exec: rec})
	})
}

func spec(name string) *task.TaskSpec {
	return &task.TaskSpec{TaskTemplate: &core.TaskTemplate{
		Id:        &core.Identifier{ResourceType: core.ResourceType_TASK, Project: "p", Domain: "development", Name: name, Version: "v1"},
		Type:      "python",
		Interface: &core.TypedInterface{},
		Target:    &core.TaskTemplate_Container{Container: &core.Container{Args: []string{"a0", "--inputs", "{{.input}}"}}},
	}}
}

func runID(name string) *common.RunIdentifier {
	return &common.RunIdentifier{Project: "p", Domain: "development", Name: name}
}

func createRun(t *testing.T, e *env, name string) *workflow.Run {
	t.Helper()
	run, err := e.state.CreateRun(context.Background(), &workflow.CreateRunRequest{
		Id:   &workflow.CreateRunRequest_RunId{RunId: runID(name)},
		Task: &workflow.CreateRunRequest_TaskSpec{TaskSpec: spec("env.main")},
		InputWrapper: &workflow.CreateRunRequest_Inputs{Inputs: &task.Inputs{Literals: []*task.NamedLiteral{{
			Name: "x", Value: &core.Literal{Value: &core.Literal_Scalar{Scalar: &core.Scalar{Value: &core.Scalar_Primitive{Primitive: &core.Primitive{Value: &core.Primitive_Integer{Integer: 7}}}}}},
		}}}},
	})
	if err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	return run
}

func child(t *testing.T, e *env, runName, parent, name string) *actions.Action {
	t.Helper()
	root, err := e.st.Actions.Get(context.Background(), store.RunKey{Project: "p", Domain: "development", RunName: runName}.Action(store.RootName))
	if err != nil {
		t.Fatal(err)
	}
	base := root.RunOutputBase
	return &actions.Action{
		ActionId:         &common.ActionIdentifier{Run: runID(runName), Name: name},
		ParentActionName: proto.String(parent),
		InputUri:         base + "/" + name + "/inputs.pb",
		RunOutputBase:    base,
		Spec:             &actions.Action_Task{Task: &workflow.TaskAction{Spec: spec("env.child")}},
	}
}

func TestCreateRunAndDetails(t *testing.T) {
	suite(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		run := createRun(t, e, "r1")
		if run.GetAction().GetStatus().GetPhase() != common.ActionPhase_ACTION_PHASE_QUEUED {
			t.Fatalf("phase = %v, want QUEUED", run.GetAction().GetStatus().GetPhase())
		}
		if len(e.exec.submitted) != 1 || e.exec.submitted[0].RunName != "r1" {
			t.Fatalf("executor told %v, want the new run", e.exec.submitted)
		}
		d, err := e.state.RunDetails(ctx, store.RunKey{Project: "p", Domain: "development", RunName: "r1"})
		if err != nil {
			t.Fatal(err)
		}
		if d.GetAction().GetTask().GetTaskTemplate().GetId().GetName() != "env.main" {
			t.Fatalf("details lack the task spec: %v", d.GetAction().GetTask())
		}
		if d.GetRunSpec() == nil || len(d.GetAction().GetAttempts()) != 1 {
			t.Fatalf("run spec %v, attempts %d", d.GetRunSpec(), len(d.GetAction().GetAttempts()))
		}
		data, err := e.state.Data(ctx, run.GetAction().GetId())
		if err != nil {
			t.Fatal(err)
		}
		if got := data.Inputs.GetLiterals()[0].GetValue().GetScalar().GetPrimitive().GetInteger(); got != 7 {
			t.Fatalf("stored input x = %d, want 7", got)
		}

		_, err = e.state.CreateRun(ctx, &workflow.CreateRunRequest{
			Id:   &workflow.CreateRunRequest_RunId{RunId: runID("r1")},
			Task: &workflow.CreateRunRequest_TaskSpec{TaskSpec: spec("env.main")},
		})
		if !errors.Is(err, errs.ErrAlreadyExists) {
			t.Fatalf("duplicate run: %v, want ErrAlreadyExists", err)
		}
		_, err = e.state.CreateRun(ctx, &workflow.CreateRunRequest{
			Id:   &workflow.CreateRunRequest_RunId{RunId: &common.RunIdentifier{Project: "p/..", Domain: "d", Name: "x"}},
			Task: &workflow.CreateRunRequest_TaskSpec{TaskSpec: spec("env.main")},
		})
		if !errors.Is(err, errs.ErrInvalid) {
			t.Fatalf("bad project: %v, want ErrInvalid", err)
		}
		_, err = e.state.CreateRun(ctx, &workflow.CreateRunRequest{
			Id:   &workflow.CreateRunRequest_ProjectId{ProjectId: &common.ProjectIdentifier{Name: "p", Domain: "development"}},
			Task: &workflow.CreateRunRequest_TaskId{TaskId: &task.TaskIdentifier{Project: "p", Domain: "development", Name: "nope", Version: "v"}},
		})
		if !errors.Is(err, errs.ErrNotFound) {
			t.Fatalf("unknown task: %v, want ErrNotFound", err)
		}
		runs, _, err := e.state.ListRuns(ctx, store.RunFilter{Project: "p", Domain: "development"}, store.Page{})
		if err != nil || len(runs) != 1 {
			t.Fatalf("bad requests must create nothing: %d runs, %v", len(runs), err)
		}
	})
}

func TestEnqueueIsIdempotent(t *testing.T) {
	suite(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		createRun(t, e, "r2")
		c := child(t, e, "r2", "a0", "c1")
		for i := 0; i < 2; i++ {
			if err := e.state.Enqueue(ctx, c); err != nil {
				t.Fatalf("enqueue #%d: %v", i+1, err)
			}
		}
		other := proto.Clone(c).(*actions.Action)
		other.Group = "different"
		if err := e.state.Enqueue(ctx, other); !errors.Is(err, errs.ErrAlreadyExists) {
			t.Fatalf("different content under the same name: %v, want ErrAlreadyExists", err)
		}
		orphan := child(t, e, "r2", "nope", "c2")
		if err := e.state.Enqueue(ctx, orphan); !errors.Is(err, errs.ErrNotFound) {
			t.Fatalf("missing parent: %v, want ErrNotFound", err)
		}
		outside := child(t, e, "r2", "a0", "c3")
		outside.InputUri = "/etc/passwd"
		if err := e.state.Enqueue(ctx, outside); !errors.Is(err, errs.ErrInvalid) {
			t.Fatalf("input outside storage: %v, want ErrInvalid", err)
		}
	})
}

// TestWatchChildren checks the informer contract the SDK relies on:
// snapshot of existing children, sentinel, then every change.
func TestWatchChildren(t *testing.T) {
	suite(t, func(t *testing.T, e *env) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		createRun(t, e, "r3")
		if err := e.state.Enqueue(ctx, child(t, e, "r3", "a0", "old")); err != nil {
			t.Fatal(err)
		}
		type msg struct {
			sentinel bool
			name     string
			phase    common.ActionPhase
			output   string
		}
		msgs := make(chan msg, 100)
		go func() {
			_ = e.state.WatchChildren(ctx, store.RunKey{Project: "p", Domain: "development", RunName: "r3"}.Action("a0"),
				func(u *workflow.ActionUpdate) error {
					msgs <- msg{name: u.GetActionId().GetName(), phase: u.GetPhase(), output: u.GetOutputUri()}
					return nil
				},
				func() error { msgs <- msg{sentinel: true}; return nil })
		}()
		recv := func() msg {
			select {
			case m := <-msgs:
				return m
			case <-ctx.Done():
				t.Fatal("no watch message")
			}
			return msg{}
		}
		if m := recv(); m.name != "old" || m.phase != common.ActionPhase_ACTION_PHASE_QUEUED {
			t.Fatalf("snapshot = %+v, want old QUEUED", m)
		}
		if m := recv(); !m.sentinel {
			t.Fatalf("want sentinel after the snapshot, got %+v", m)
		}
		if err := e.state.Enqueue(ctx, child(t, e, "r3", "a0", "new")); err != nil {
			t.Fatal(err)
		}
		if m := recv(); m.name != "new" || m.phase != common.ActionPhase_ACTION_PHASE_QUEUED {
			t.Fatalf("update = %+v, want new QUEUED", m)
		}
		key := store.RunKey{Project: "p", Domain: "development", RunName: "r3"}.Action("new")
		if _, err := e.st.Actions.Update(ctx, key, store.AnyVersion, store.Update{Phase: phase.Succeeded}); err != nil {
			t.Fatal(err)
		}
		m := recv()
		if m.name != "new" || m.phase != common.ActionPhase_ACTION_PHASE_SUCCEEDED || m.output == "" {
			t.Fatalf("terminal update = %+v, want new SUCCEEDED with an output uri", m)
		}
	})
}

func TestAbortCascades(t *testing.T) {
	suite(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		createRun(t, e, "r4")
		for _, c := range []*actions.Action{child(t, e, "r4", "a0", "c1"), child(t, e, "r4", "c1", "g1")} {
			if err := e.state.Enqueue(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.state.Abort(ctx, store.RunKey{Project: "p", Domain: "development", RunName: "r4"}.Action("a0"), "stop", ""); err != nil {
			t.Fatal(err)
		}
		if len(e.exec.abort) != 3 {
			t.Fatalf("executor told to abort %v, want a0, c1 and g1", e.exec.abort)
		}
		if err := e.state.Enqueue(ctx, child(t, e, "r4", "c1", "late")); !errors.Is(err, errs.ErrAborted) {
			t.Fatalf("enqueue under an aborted parent: %v, want ErrAborted", err)
		}
		if err := e.state.Abort(ctx, store.RunKey{Project: "p", Domain: "development", RunName: "nope"}.Action("a0"), "", ""); !errors.Is(err, errs.ErrNotFound) {
			t.Fatalf("abort of a missing run: %v, want ErrNotFound", err)
		}
	})
}

func TestCodeBundleURI(t *testing.T) {
	suite(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		sp := spec("env.main")
		sp.TaskTemplate.GetContainer().Args = []string{"a0", "--tgz", "/blobs/uploads/fast1.tar.gz", "--dest", "."}
		run, err := e.state.CreateRun(ctx, &workflow.CreateRunRequest{
			Id:   &workflow.CreateRunRequest_RunId{RunId: runID("r5")},
			Task: &workflow.CreateRunRequest_TaskSpec{TaskSpec: sp},
		})
		if err != nil {
			t.Fatal(err)
		}
		uri, err := e.state.CodeBundleURI(ctx, &common.ActionAttemptIdentifier{ActionId: run.GetAction().GetId(), Attempt: 1}, nil)
		if err != nil || uri != "/blobs/uploads/fast1.tar.gz" {
			t.Fatalf("bundle = %q, %v", uri, err)
		}
		sp.TaskTemplate.GetContainer().Args = []string{"a0", "--pkl", "/blobs/x.pkl.gz"}
		run, err = e.state.CreateRun(ctx, &workflow.CreateRunRequest{
			Id:   &workflow.CreateRunRequest_RunId{RunId: runID("r6")},
			Task: &workflow.CreateRunRequest_TaskSpec{TaskSpec: sp},
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.state.CodeBundleURI(ctx, &common.ActionAttemptIdentifier{ActionId: run.GetAction().GetId(), Attempt: 1}, nil); !errors.Is(err, errs.ErrInvalid) {
			t.Fatalf("pickled bundle: %v, want ErrInvalid", err)
		}
	})
}
