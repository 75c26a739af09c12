package actions_test

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"
	"gorm.io/gorm"

	"fmgr.dev/actions"
	actionspb "fmgr.dev/gen/go/flyteidl2/actions"
	"fmgr.dev/gen/go/flyteidl2/actions/actionsconnect"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/gen/go/flyteidl2/workflow/workflowconnect"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/pgtest"
	"fmgr.dev/internal/rpctest"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/runstate/statetest"
	"fmgr.dev/internal/server"
	"fmgr.dev/internal/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// harness serves ActionsService, QueueService and StateService through the
// manager's real server (interceptors, error mapping) over a real database
// and file blob store; a recorder stands in for the executor.
type harness struct {
	state *runstate.Service
	st    *store.Store
	exec  *recorder

	actions actionsconnect.ActionsServiceClient
	queue   workflowconnect.QueueServiceClient
}

// recorder remembers what the executor was told.
type recorder struct {
	mu               sync.Mutex
	submitted, abort []store.ActionKey
}

func (r *recorder) Submit(k store.ActionKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.submitted = append(r.submitted, k)
}

func (r *recorder) Abort(k store.ActionKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.abort = append(r.abort, k)
}

func (r *recorder) submissions() []store.ActionKey {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]store.ActionKey(nil), r.submitted...)
}

func (r *recorder) aborted() []store.ActionKey {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]store.ActionKey(nil), r.abort...)
}

func eachDB(t *testing.T, fn func(t *testing.T, h *harness)) {
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) { fn(t, newHarness(t, g)) })
}

func newHarness(t *testing.T, g *gorm.DB) *harness {
	t.Helper()
	rec := &recorder{}
	state, _, env := statetest.New(t, g, statetest.Options{}, func(*runstate.Service) *recorder { return rec })
	log := env.Log
	h := &harness{state: state, st: env.Store, exec: rec}

	srvCfg := config.Default().Server
	srvCfg.Port = 0
	srv := server.New(srvCfg, log)
	if err := actions.Setup(srv, state); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	h.actions = actionsconnect.NewActionsServiceClient(hs.Client(), hs.URL)
	h.queue = workflowconnect.NewQueueServiceClient(hs.Client(), hs.URL)
	return h
}

const project, domain = "p", "development"

func runKey(name string) store.RunKey {
	return store.RunKey{Project: project, Domain: domain, RunName: name}
}

func runID(name string) *common.RunIdentifier {
	return &common.RunIdentifier{Project: project, Domain: domain, Name: name}
}

func taskSpec(name string) *task.TaskSpec {
	return &task.TaskSpec{TaskTemplate: &core.TaskTemplate{
		Id:        &core.Identifier{ResourceType: core.ResourceType_TASK, Project: project, Domain: domain, Name: name, Version: "v1"},
		Type:      "python",
		Interface: &core.TypedInterface{},
		Target:    &core.TaskTemplate_Container{Container: &core.Container{Args: []string{"a0", "--inputs", "{{.input}}"}}},
	}}
}

// createRun starts a run and returns its storage base directory.
func (h *harness) createRun(t *testing.T, name string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := h.state.CreateRun(ctx, &workflow.CreateRunRequest{
		Id:   &workflow.CreateRunRequest_RunId{RunId: runID(name)},
		Task: &workflow.CreateRunRequest_TaskSpec{TaskSpec: taskSpec("env.main")},
	}); err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	root, err := h.st.Actions.Get(ctx, runKey(name).Action(store.RootName))
	if err != nil {
		t.Fatal(err)
	}
	return root.RunOutputBase
}

// child is the Action the SDK's controller enqueues for a task child.
func child(base, run, parent, name string) *actionspb.Action {
	return &actionspb.Action{
		ActionId:         &common.ActionIdentifier{Run: runID(run), Name: name},
		ParentActionName: proto.String(parent),
		InputUri:         base + "/" + name + "/inputs.pb",
		RunOutputBase:    base,
		Spec:             &actionspb.Action_Task{Task: &workflow.TaskAction{Spec: taskSpec("env.child")}},
	}
}

// children lists the children of parent in the database.
func (h *harness) children(t *testing.T, run, parent string) []string {
	t.Helper()
	var names []string
	page := store.Page{Limit: store.MaxPageSize}
	for {
		rows, next, err := h.st.Actions.ListChildren(context.Background(), runKey(run).Action(parent), page)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			names = append(names, r.Name)
		}
		if next == "" {
			return names
		}
		page.Token = next
	}
}

// wantCode is rpctest.WantCode.
var wantCode = rpctest.WantCode
