package actions_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	actionspb "fmgr.dev/gen/go/flyteidl2/actions"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/store"
)

// Enqueue is idempotent: the same request twice makes one action (and one
// submission to the executor); the same name with other content is
// AlreadyExists; bad requests answer their code and create nothing.
func TestEnqueue(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		base := h.createRun(t, "r1")
		c1 := child(base, "r1", "a0", "c1")
		for i := 0; i < 2; i++ {
			if _, err := h.actions.Enqueue(ctx, connect.NewRequest(&actionspb.EnqueueRequest{Action: c1})); err != nil {
				t.Fatalf("Enqueue #%d: %v", i+1, err)
			}
		}
		if got := h.children(t, "r1", "a0"); !slices.Equal(got, []string{"c1"}) {
			t.Fatalf("children after the same Enqueue twice = %v, want [c1]", got)
		}
		if submitted, want := h.exec.submissions(), []store.ActionKey{runKey("r1").Action("a0"), runKey("r1").Action("c1")}; !slices.Equal(submitted, want) {
			t.Fatalf("executor was given %v, want %v", submitted, want)
		}

		other := proto.Clone(c1).(*actionspb.Action)
		other.Group = "another group"
		_, err := h.actions.Enqueue(ctx, connect.NewRequest(&actionspb.EnqueueRequest{Action: other}))
		wantCode(t, err, connect.CodeAlreadyExists, "c1")
		other = proto.Clone(c1).(*actionspb.Action)
		other.GetTask().Spec = taskSpec("env.other")
		_, err = h.actions.Enqueue(ctx, connect.NewRequest(&actionspb.EnqueueRequest{Action: other}))
		wantCode(t, err, connect.CodeAlreadyExists, "c1")

		_, err = h.actions.Enqueue(ctx, connect.NewRequest(&actionspb.EnqueueRequest{Action: child(base, "r1", "nope", "c2")}))
		wantCode(t, err, connect.CodeNotFound, "nope")
		_, err = h.actions.Enqueue(ctx, connect.NewRequest(&actionspb.EnqueueRequest{Action: child(base, "missing-run", "a0", "c2")}))
		wantCode(t, err, connect.CodeNotFound)
		_, err = h.actions.Enqueue(ctx, connect.NewRequest(&actionspb.EnqueueRequest{}))
		wantCode(t, err, connect.CodeInvalidArgument, "action")
		withSpec := child(base, "r1", "a0", "c3")
		_, err = h.actions.Enqueue(ctx, connect.NewRequest(&actionspb.EnqueueRequest{Action: withSpec, RunSpec: h.runSpec(t, "r1")}))
		wantCode(t, err, connect.CodeInvalidArgument, "run_spec")

		// Under an aborted parent: Aborted, and nothing is made.
		if _, err := h.actions.Abort(ctx, connect.NewRequest(&actionspb.AbortRequest{ActionId: c1.GetActionId()})); err != nil {
			t.Fatal(err)
		}
		_, err = h.actions.Enqueue(ctx, connect.NewRequest(&actionspb.EnqueueRequest{Action: child(base, "r1", "c1", "g1")}))
		wantCode(t, err, connect.CodeAborted, "c1")

		if got := h.children(t, "r1", "a0"); !slices.Equal(got, []string{"c1"}) {
			t.Fatalf("children after rejected Enqueues = %v, want [c1]", got)
		}
		if got := h.children(t, "r1", "c1"); len(got) != 0 {
			t.Fatalf("children of the aborted c1 = %v, want none", got)
		}
	})
}

// runSpec is the spec run was created with, as a client could resend it.
func (h *harness) runSpec(t *testing.T, run string) *task.RunSpec {
	t.Helper()
	s, err := h.state.RunSpec(context.Background(), runKey(run))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// watchMsg is one message of a WatchForUpdates stream.
type watchMsg struct {
	sentinel bool
	update   *workflow.ActionUpdate
}

// watch opens WatchForUpdates on parent and returns its messages; the stream
// ends with the test.
func (h *harness) watch(t *testing.T, ctx context.Context, parent *common.ActionIdentifier) (<-chan watchMsg, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	stream, err := h.actions.WatchForUpdates(ctx, connect.NewRequest(watchRequest(parent)))
	if err != nil {
		t.Fatal(err)
	}
	msgs, done := make(chan watchMsg, 100), make(chan error, 1)
	go func() {
		defer stream.Close()
		for stream.Receive() {
			m := stream.Msg()
			msgs <- watchMsg{sentinel: m.GetControlMessage().GetSentinel(), update: m.GetActionUpdate()}
		}
		done <- stream.Err()
	}()
	return msgs, done
}

func watchRequest(parent *common.ActionIdentifier) *actionspb.WatchForUpdatesRequest {
	if parent == nil {
		return &actionspb.WatchForUpdatesRequest{}
	}
	return &actionspb.WatchForUpdatesRequest{Filter: &actionspb.WatchForUpdatesRequest_ParentActionId{ParentActionId: parent}}
}

// WatchForUpdates sends the snapshot of existing children, the sentinel,
// then every update including the terminal ones with output_uri and error.
func TestWatchForUpdates(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		base := h.createRun(t, "r1")
		for _, name := range []string{"old1", "old2"} {
			if err := h.state.Enqueue(ctx, child(base, "r1", "a0", name)); err != nil {
				t.Fatal(err)
			}
		}
		parent := &common.ActionIdentifier{Run: runID("r1"), Name: "a0"}
		msgs, done := h.watch(t, ctx, parent)
		recv := func() watchMsg {
			t.Helper()
			select {
			case m := <-msgs:
				return m
			case err := <-done:
				t.Fatalf("stream ended: %v", err)
			case <-ctx.Done():
				t.Fatal("no message")
			}
			return watchMsg{}
		}
		var snapshot []string
		for i := 0; i < 2; i++ {
			m := recv()
			if m.update.GetPhase() != common.ActionPhase_ACTION_PHASE_QUEUED || m.update.GetOutputUri() != "" {
				t.Fatalf("snapshot message %v, want a QUEUED child without outputs", m)
			}
			snapshot = append(snapshot, m.update.GetActionId().GetName())
		}
		slices.Sort(snapshot)
		if !slices.Equal(snapshot, []string{"old1", "old2"}) {
			t.Fatalf("snapshot = %v", snapshot)
		}
		if m := recv(); !m.sentinel {
			t.Fatalf("after the snapshot: %v, want the sentinel", m)
		}

		if _, err := h.actions.Enqueue(ctx, connect.NewRequest(&actionspb.EnqueueRequest{Action: child(base, "r1", "a0", "new")})); err != nil {
			t.Fatal(err)
		}
		if m := recv(); m.update.GetActionId().GetName() != "new" || m.update.GetPhase() != common.ActionPhase_ACTION_PHASE_QUEUED {
			t.Fatalf("update %v, want new QUEUED", m)
		}

		set := func(name string, u store.Update) *store.Action {
			t.Helper()
			a, err := h.st.Actions.Update(ctx, runKey("r1").Action(name), store.AnyVersion, u)
			if err != nil {
				t.Fatal(err)
			}
			return a
		}
		set("old1", store.Update{Phase: phase.Running})
		if m := recv(); m.update.GetActionId().GetName() != "old1" || m.update.GetPhase() != common.ActionPhase_ACTION_PHASE_RUNNING {
			t.Fatalf("update %v, want old1 RUNNING", m)
		}
		done1 := set("old1", store.Update{Phase: phase.Succeeded})
		m := recv()
		if m.update.GetActionId().GetName() != "old1" || m.update.GetPhase() != common.ActionPhase_ACTION_PHASE_SUCCEEDED ||
			m.update.GetOutputUri() != runstate.OutputDir(done1, done1.Attempts) || m.update.GetError() != nil {
			t.Fatalf("terminal update %v, want old1 SUCCEEDED with output_uri %s", m.update, runstate.OutputDir(done1, done1.Attempts))
		}
		failure, err := proto.Marshal(&core.ExecutionError{Code: "ValueError", Message: "bad input", Kind: core.ExecutionError_USER})
		if err != nil {
			t.Fatal(err)
		}
		failed := set("new", store.Update{Phase: phase.Failed, ErrorInfo: failure})
		m = recv()
		if m.update.GetActionId().GetName() != "new" || m.update.GetPhase() != common.ActionPhase_ACTION_PHASE_FAILED ||
			m.update.GetOutputUri() != runstate.OutputDir(failed, failed.Attempts) ||
			m.update.GetError().GetCode() != "ValueError" || m.update.GetError().GetMessage() != "bad input" {
			t.Fatalf("failure update %v, want new FAILED with its output dir and the ValueError", m.update)
		}
		// The parent's own changes are not its children's updates.
		set("a0", store.Update{Phase: phase.Running})
		set("old2", store.Update{Phase: phase.Running})
		if m := recv(); m.update.GetActionId().GetName() != "old2" {
			t.Fatalf("update %v, want old2 (the parent's change is not sent)", m)
		}
	})
}

func TestWatchForUpdatesRejectsBadParents(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		h.createRun(t, "r1")
		for _, c := range []struct {
			parent *common.ActionIdentifier
			code   connect.Code
			field  string
		}{
			{nil, connect.CodeInvalidArgument, "parent_action_id"},
			{&common.ActionIdentifier{Run: runID("r1")}, connect.CodeInvalidArgument, "parent_action_id"},
			{&common.ActionIdentifier{Run: runID("r1"), Name: "no/such"}, connect.CodeInvalidArgument, "parent_action_id"},
			{&common.ActionIdentifier{Run: runID("r1"), Name: "nope"}, connect.CodeNotFound, ""},
			{&common.ActionIdentifier{Run: runID("other"), Name: "a0"}, connect.CodeNotFound, ""},
		} {
			msgs, done := h.watch(t, ctx, c.parent)
			select {
			case err := <-done:
				wantCode(t, err, c.code, c.field)
			case m := <-msgs:
				t.Fatalf("watch of %v sent %v, want %v", c.parent, m, c.code)
			case <-ctx.Done():
				t.Fatalf("watch of %v did not end", c.parent)
			}
		}
	})
}

// Abort marks the action and every descendant, tells the executor about
// each, and answers NotFound or InvalidArgument for what it cannot abort.
func TestAbort(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		base := h.createRun(t, "r1")
		for _, c := range [][2]string{{"a0", "c1"}, {"c1", "g1"}, {"g1", "gg1"}, {"a0", "c2"}} {
			if err := h.state.Enqueue(ctx, child(base, "r1", c[0], c[1])); err != nil {
				t.Fatal(err)
			}
		}
		_, err := h.actions.Abort(ctx, connect.NewRequest(&actionspb.AbortRequest{
			ActionId: &common.ActionIdentifier{Run: runID("r1"), Name: "c1"}, Reason: proto.String("enough"),
		}))
		if err != nil {
			t.Fatal(err)
		}
		got := h.exec.aborted()
		slices.SortFunc(got, func(a, b store.ActionKey) int { return strings.Compare(a.Name, b.Name) })
		if want := []store.ActionKey{runKey("r1").Action("c1"), runKey("r1").Action("g1"), runKey("r1").Action("gg1")}; !slices.Equal(got, want) {
			t.Fatalf("executor told to abort %v, want %v", got, want)
		}
		for name, marked := range map[string]bool{"c1": true, "g1": true, "gg1": true, "c2": false, "a0": false} {
			a, err := h.st.Actions.Get(ctx, runKey("r1").Action(name))
			if err != nil {
				t.Fatal(err)
			}
			if (a.AbortRequestedAt != nil) != marked {
				t.Fatalf("%s: abort requested = %v, want %v", name, a.AbortRequestedAt != nil, marked)
			}
		}

		_, err = h.actions.Abort(ctx, connect.NewRequest(&actionspb.AbortRequest{ActionId: &common.ActionIdentifier{Run: runID("r1"), Name: "nope"}}))
		wantCode(t, err, connect.CodeNotFound)
		_, err = h.actions.Abort(ctx, connect.NewRequest(&actionspb.AbortRequest{}))
		wantCode(t, err, connect.CodeInvalidArgument, "action_id")
		_, err = h.actions.Abort(ctx, connect.NewRequest(&actionspb.AbortRequest{ActionId: &common.ActionIdentifier{Run: &common.RunIdentifier{Project: "p", Name: "r1"}, Name: "c2"}}))
		wantCode(t, err, connect.CodeInvalidArgument, "domain")
		if n := len(h.exec.aborted()); n != 3 {
			t.Fatalf("rejected aborts reached the executor: %d aborts", n)
		}
	})
}

// Every bad field of QueueService.EnqueueAction answers InvalidArgument
// naming that field, and nothing is created.
func TestEnqueueActionValidation(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		base := h.createRun(t, "r1")
		good := func() *workflow.EnqueueActionRequest {
			return &workflow.EnqueueActionRequest{
				ActionId:         &common.ActionIdentifier{Run: runID("r1"), Name: "c1"},
				ParentActionName: proto.String("a0"),
				InputUri:         base + "/c1/inputs.pb",
				RunOutputBase:    base,
				Spec:             &workflow.EnqueueActionRequest_Task{Task: &workflow.TaskAction{Spec: taskSpec("env.child")}},
			}
		}
		for _, c := range []struct {
			field string
			edit  func(*workflow.EnqueueActionRequest)
		}{
			{"action_id", func(r *workflow.EnqueueActionRequest) { r.ActionId = nil }},
			{"action_id", func(r *workflow.EnqueueActionRequest) { r.ActionId.Name = "" }},
			{"action_id", func(r *workflow.EnqueueActionRequest) { r.ActionId.Name = "bad name" }},
			{"project", func(r *workflow.EnqueueActionRequest) { r.ActionId.Run.Project = "" }},
			{"domain", func(r *workflow.EnqueueActionRequest) { r.ActionId.Run.Domain = "a/b" }},
			{"parent_action_name", func(r *workflow.EnqueueActionRequest) { r.ParentActionName = nil }},
			{"parent_action_name", func(r *workflow.EnqueueActionRequest) { r.ParentActionName = proto.String("../a0") }},
			{"input_uri", func(r *workflow.EnqueueActionRequest) { r.InputUri = "" }},
			{"input_uri", func(r *workflow.EnqueueActionRequest) { r.InputUri = "/etc/passwd" }},
			{"run_output_base", func(r *workflow.EnqueueActionRequest) { r.RunOutputBase = "" }},
			{"run_output_base", func(r *workflow.EnqueueActionRequest) { r.RunOutputBase = "s3://elsewhere/x" }},
			{"task", func(r *workflow.EnqueueActionRequest) { r.Spec = nil }},
			{"task.spec", func(r *workflow.EnqueueActionRequest) {
				r.Spec = &workflow.EnqueueActionRequest_Task{Task: &workflow.TaskAction{}}
			}},
			{"task.spec.task_template", func(r *workflow.EnqueueActionRequest) { r.GetTask().Spec.TaskTemplate = nil }},
			{"task.spec.task_template", func(r *workflow.EnqueueActionRequest) { r.GetTask().Spec.TaskTemplate.Target = nil }},
			{"task.id", func(r *workflow.EnqueueActionRequest) {
				r.Spec = &workflow.EnqueueActionRequest_Task{Task: &workflow.TaskAction{Id: &task.TaskIdentifier{Project: "p", Domain: "development"}}}
			}},
			{"condition", func(r *workflow.EnqueueActionRequest) {
				r.Spec = &workflow.EnqueueActionRequest_Condition{Condition: &workflow.ConditionAction{Name: "c"}}
			}},
		} {
			t.Run(c.field, func(t *testing.T) {
				req := good()
				c.edit(req)
				_, err := h.queue.EnqueueAction(ctx, connect.NewRequest(req))
				wantCode(t, err, connect.CodeInvalidArgument, c.field)
			})
		}
		if got := h.children(t, "r1", "a0"); len(got) != 0 {
			t.Fatalf("rejected requests created %v", got)
		}
		if _, err := h.queue.EnqueueAction(ctx, connect.NewRequest(good())); err != nil {
			t.Fatalf("the valid request: %v", err)
		}
		if got := h.children(t, "r1", "a0"); !slices.Equal(got, []string{"c1"}) {
			t.Fatalf("children = %v, want [c1]", got)
		}
	})
}
