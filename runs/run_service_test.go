package runs_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/actions"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

var autoCreateProjects = config.Projects{AutoCreate: true}

func inlineTask(project, domain, name string) *task.TaskSpec {
	return &task.TaskSpec{TaskTemplate: &core.TaskTemplate{
		Id:        &core.Identifier{ResourceType: core.ResourceType_TASK, Project: project, Domain: domain, Name: name, Version: "v1"},
		Type:      "python",
		Interface: &core.TypedInterface{},
		Target:    &core.TaskTemplate_Container{Container: &core.Container{Args: []string{"a0", "--inputs", "{{.input}}"}}},
	}}
}

// createRun starts run id with an inline task through the API.
func (h *harness) createRun(t *testing.T, id *common.RunIdentifier, taskName string) {
	t.Helper()
	_, err := h.runs.CreateRun(context.Background(), connect.NewRequest(&workflow.CreateRunRequest{
		Id:   &workflow.CreateRunRequest_RunId{RunId: id},
		Task: &workflow.CreateRunRequest_TaskSpec{TaskSpec: inlineTask(id.GetProject(), id.GetDomain(), taskName)},
	}))
	if err != nil {
		t.Fatalf("CreateRun %s: %v", id.GetName(), err)
	}
}

// enqueue adds child name under parent of run, as a parent task's controller would.
func (h *harness) enqueue(t *testing.T, run *common.RunIdentifier, parent, name string) {
	t.Helper()
	ctx := context.Background()
	root, err := h.st.Actions.Get(ctx, runKeyOf(run).Action(store.RootName))
	if err != nil {
		t.Fatal(err)
	}
	base := root.RunOutputBase
	if err := h.state.Enqueue(ctx, &actions.Action{
		ActionId:         &common.ActionIdentifier{Run: run, Name: name},
		ParentActionName: proto.String(parent),
		InputUri:         base + "/" + name + "/inputs.pb",
		RunOutputBase:    base,
		Spec:             &actions.Action_Task{Task: &workflow.TaskAction{Spec: inlineTask(run.GetProject(), run.GetDomain(), "env.child")}},
	}); err != nil {
		t.Fatalf("enqueue %s: %v", name, err)
	}
}

// setPhase moves an action as the executor would, and tells the watchers.
func (h *harness) setPhase(t *testing.T, run *common.RunIdentifier, name string, p phase.Phase) {
	t.Helper()
	if _, err := h.st.Actions.Update(context.Background(), runKeyOf(run).Action(name), store.AnyVersion, store.Update{Phase: p}); err != nil {
		t.Fatalf("set %s %v: %v", name, p, err)
	}
}

func runKeyOf(id *common.RunIdentifier) store.RunKey {
	return store.RunKey{Org: id.GetOrg(), Project: id.GetProject(), Domain: id.GetDomain(), RunName: id.GetName()}
}

func rid(org, project, domain, name string) *common.RunIdentifier {
	return &common.RunIdentifier{Org: org, Project: project, Domain: domain, Name: name}
}

// serverStream is a client's view of a server stream: its messages, in
// order, then how it ended. One channel carries both (msgs is closed after
// the last message, err set before), so a message sent before the end is
// always read before the end: with two channels, a reader that came late
// found both ready and select took either.
type serverStream[T any] struct {
	msgs chan *T
	err  error // how the stream ended; set before msgs is closed
}

// open starts a server stream; it is cancelled when the test ends.
func open[Req, T any](t *testing.T, call func(context.Context, *connect.Request[Req]) (*connect.ServerStreamForClient[T], error), req *Req) *serverStream[T] {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := call(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	s := &serverStream[T]{msgs: make(chan *T, 4096)}
	go func() {
		defer stream.Close()
		for stream.Receive() {
			s.msgs <- stream.Msg()
		}
		s.err = stream.Err()
		close(s.msgs)
	}()
	return s
}

// streamWait bounds every wait for a message: generous, for a loaded machine.
const streamWait = 2 * time.Minute

// next is the stream's next message; the test fails if it ends instead.
func (s *serverStream[T]) next(t *testing.T) *T {
	t.Helper()
	select {
	case m, ok := <-s.msgs:
		if !ok {
			t.Fatalf("stream ended (%v), want another message", s.err)
		}
		return m
	case <-time.After(streamWait):
		t.Fatal("no message on the stream")
	}
	return nil
}

// end is how the stream ended; the test fails if it sends a message instead.
func (s *serverStream[T]) end(t *testing.T) error {
	t.Helper()
	select {
	case m, ok := <-s.msgs:
		if ok {
			t.Fatalf("stream sent %v, want it to end", m)
		}
		return s.err
	case <-time.After(streamWait):
		t.Fatal("the stream did not end")
	}
	return nil
}

// runWatch follows a WatchRuns stream. The hub delivers at least once and
// a watcher reads a run's current state when a change reaches it, so a
// run already sent may come again, with its latest phase; what a test can
// rely on is that every change in scope arrives and nothing outside the
// scope ever does.
type runWatch struct {
	*serverStream[workflow.WatchRunsResponse]
	first []string            // the runs of the first message
	seen  map[string]struct{} // every run sent so far
}

func watchRuns(t *testing.T, h *harness, req *workflow.WatchRunsRequest) *runWatch {
	t.Helper()
	w := &runWatch{serverStream: open(t, h.runs.WatchRuns, req), seen: map[string]struct{}{}}
	for _, r := range w.next(t).GetRuns() { // the first message is the scope's runs
		name := r.GetAction().GetId().GetRun().GetName()
		w.first = append(w.first, name)
		w.seen[name] = struct{}{}
	}
	slices.Sort(w.first)
	return w
}

// await reads updates until each run of want has been sent in phase. Every
// run sent meanwhile must be one already sent or one of want: anything
// else is outside the scope.
func (w *runWatch) await(t *testing.T, phase common.ActionPhase, want ...string) {
	t.Helper()
	pending := map[string]bool{}
	for _, name := range want {
		pending[name] = true
	}
	for len(pending) > 0 {
		runs := w.next(t).GetRuns()
		if len(runs) != 1 {
			t.Fatalf("an update carries %d runs, want 1", len(runs))
		}
		name := runs[0].GetAction().GetId().GetRun().GetName()
		if _, ok := w.seen[name]; !ok && !slices.Contains(want, name) {
			t.Fatalf("sent run %s, which is outside the watched scope (waiting for %v)", name, want)
		}
		w.seen[name] = struct{}{}
		if runs[0].GetAction().GetStatus().GetPhase() == phase {
			delete(pending, name)
		}
	}
}

// WatchRuns sends the scope's runs, then every change to a run in the
// scope and nothing from outside it: another project, another org,
// another task. The runs outside are made before the ones inside: the hub
// delivers in commit order, so a leak would arrive before what is awaited.
func TestWatchRuns(t *testing.T) {
	eachDatabase(t, autoCreateProjects, func(t *testing.T, h *harness) {
		r1 := rid("", "p", "development", "r1")
		h.createRun(t, r1, "env.main")
		h.createRun(t, rid("", "q", "development", "other-project"), "env.main")
		h.createRun(t, rid("", "p", "staging", "other-domain"), "env.main")
		h.createRun(t, rid("acme", "p", "development", "other-org"), "env.main")

		byProject := watchRuns(t, h, &workflow.WatchRunsRequest{Target: &workflow.WatchRunsRequest_ProjectId{
			ProjectId: &common.ProjectIdentifier{Name: "p", Domain: "development"}}})
		byTask := watchRuns(t, h, &workflow.WatchRunsRequest{Target: &workflow.WatchRunsRequest_TaskId{
			TaskId: &task.TaskIdentifier{Project: "p", Domain: "development", Name: "env.main", Version: "v1"}}})
		byOrg := watchRuns(t, h, &workflow.WatchRunsRequest{Target: &workflow.WatchRunsRequest_Org{Org: "acme"}})
		// "local" is how an SDK run by the manager names the default org.
		byLocalOrg := watchRuns(t, h, &workflow.WatchRunsRequest{Target: &workflow.WatchRunsRequest_Org{Org: "local"}})
		for name, c := range map[string]struct {
			w    *runWatch
			want []string
		}{
			"project":   {byProject, []string{"r1"}},
			"task":      {byTask, []string{"r1"}},
			"org":       {byOrg, []string{"other-org"}},
			"local org": {byLocalOrg, []string{"other-domain", "other-project", "r1"}},
		} {
			if !slices.Equal(c.w.first, c.want) {
				t.Fatalf("watch by %s: first message %v, want the scope's runs %v", name, c.w.first, c.want)
			}
		}

		h.createRun(t, rid("", "q", "development", "later-other-project"), "env.main")
		h.createRun(t, rid("acme", "p", "development", "later-other-org"), "env.main")
		h.createRun(t, rid("", "p", "development", "other-task"), "env.other")
		h.createRun(t, rid("", "p", "development", "r2"), "env.main")
		const queued, running = common.ActionPhase_ACTION_PHASE_QUEUED, common.ActionPhase_ACTION_PHASE_RUNNING
		byProject.await(t, queued, "other-task", "r2")
		byTask.await(t, queued, "r2")
		byOrg.await(t, queued, "later-other-org")
		byLocalOrg.await(t, queued, "later-other-project", "other-task", "r2")

		// A phase change of a run in scope arrives with its new phase; a
		// child's change is not a run's.
		h.enqueue(t, r1, "a0", "c1")
		h.setPhase(t, r1, "c1", phase.Running)
		h.setPhase(t, r1, "a0", phase.Running)
		for _, w := range []*runWatch{byProject, byTask, byLocalOrg} {
			w.await(t, running, "r1")
		}
		// The acme watch saw none of it (await fails on r1).
		h.setPhase(t, rid("acme", "p", "development", "other-org"), "a0", phase.Running)
		byOrg.await(t, running, "other-org")
	})
}

func TestWatchRunsRejectsBadTargets(t *testing.T) {
	eachDatabase(t, autoCreateProjects, func(t *testing.T, h *harness) {
		for _, c := range []struct {
			req   *workflow.WatchRunsRequest
			field string
		}{
			{&workflow.WatchRunsRequest{}, "target"},
			{&workflow.WatchRunsRequest{Target: &workflow.WatchRunsRequest_ProjectId{ProjectId: &common.ProjectIdentifier{Domain: "development"}}}, "project_id"},
			{&workflow.WatchRunsRequest{Target: &workflow.WatchRunsRequest_ProjectId{ProjectId: &common.ProjectIdentifier{Name: "p/..", Domain: "development"}}}, "project_id"},
			{&workflow.WatchRunsRequest{Target: &workflow.WatchRunsRequest_TaskId{TaskId: &task.TaskIdentifier{Project: "p", Domain: "development"}}}, "task_id"},
			{&workflow.WatchRunsRequest{Target: &workflow.WatchRunsRequest_ClusterId{ClusterId: &common.ClusterIdentifier{Name: "c"}}}, "cluster"},
		} {
			wantCode(t, open(t, h.runs.WatchRuns, c.req).end(t), connect.CodeInvalidArgument, c.field)
		}
	})
}

// WatchActions sends every action of the run, then every change, each
// marked with whether it meets the request's filters: itself, or as the
// ancestor of an action that does (the path to a match is shown).
func TestWatchActions(t *testing.T) {
	eachDatabase(t, autoCreateProjects, func(t *testing.T, h *harness) {
		r1 := rid("", "p", "development", "r1")
		h.createRun(t, r1, "env.main")
		h.enqueue(t, r1, "a0", "c1")
		h.enqueue(t, r1, "a0", "c2")
		h.enqueue(t, r1, "c1", "g1")
		h.createRun(t, rid("", "p", "development", "r2"), "env.main")
		h.setPhase(t, r1, "c2", phase.Running)

		type seen struct {
			name  string
			phase common.ActionPhase
			meets bool
		}
		flatten := func(batch []*workflow.EnrichedAction) []seen {
			var out []seen
			for _, e := range batch {
				out = append(out, seen{e.GetAction().GetId().GetName(), e.GetAction().GetStatus().GetPhase(), e.GetMeetsFilter()})
			}
			return out
		}
		const queued, running, succeeded = common.ActionPhase_ACTION_PHASE_QUEUED, common.ActionPhase_ACTION_PHASE_RUNNING, common.ActionPhase_ACTION_PHASE_SUCCEEDED
		byName := open(t, h.runs.WatchActions, &workflow.WatchActionsRequest{RunId: r1, Filter: []*common.Filter{
			{Field: "name", Function: common.Filter_CONTAINS_CASE_INSENSITIVE, Values: []string{"C1"}},
		}})
		byPhase := open(t, h.runs.WatchActions, &workflow.WatchActionsRequest{RunId: r1, Filter: []*common.Filter{
			{Field: "phase", Function: common.Filter_VALUE_IN, Values: []string{"RUNNING", "ACTION_PHASE_SUCCEEDED"}},
		}})
		all := open(t, h.runs.WatchActions, &workflow.WatchActionsRequest{RunId: r1})
		for _, c := range []struct {
			name   string
			stream *serverStream[workflow.WatchActionsResponse]
			first  []seen
		}{
			{"name", byName, []seen{{"a0", queued, true}, {"c1", queued, true}, {"c2", running, false}, {"g1", queued, false}}},
			{"phase", byPhase, []seen{{"a0", queued, true}, {"c1", queued, false}, {"c2", running, true}, {"g1", queued, false}}},
			{"none", all, []seen{{"a0", queued, true}, {"c1", queued, true}, {"c2", running, true}, {"g1", queued, true}}},
		} {
			if got := flatten(c.stream.next(t).GetEnrichedActions()); !slices.Equal(got, c.first) {
				t.Fatalf("filter %s: first message %v, want %v", c.name, got, c.first)
			}
		}
		// Then every change of the run, each marked by the filters. As with
		// runs, an action may come again with its latest state, so the test
		// awaits the changes and checks every message on the way: r2's
		// change, made first, would arrive before them if it leaked.
		h.setPhase(t, rid("", "p", "development", "r2"), "a0", phase.Running)
		h.setPhase(t, r1, "c1", phase.Succeeded)
		h.setPhase(t, r1, "g1", phase.Running)
		for _, c := range []struct {
			name   string
			stream *serverStream[workflow.WatchActionsResponse]
			meets  func(seen) bool
		}{
			{"name", byName, func(s seen) bool { return s.name == "c1" || s.name == "a0" }},
			{"phase", byPhase, func(s seen) bool { return s.phase == running || s.phase == succeeded || s.name == "a0" }},
			{"none", all, func(seen) bool { return true }},
		} {
			pending := map[seen]bool{{"c1", succeeded, true}: true, {"g1", running, c.name != "name"}: true}
			for len(pending) > 0 {
				batch := c.stream.next(t).GetEnrichedActions()
				for i, s := range flatten(batch) {
					if run := batch[i].GetAction().GetId().GetRun().GetName(); run != "r1" {
						t.Fatalf("filter %s: sent %s of run %s", c.name, s.name, run)
					}
					if s.meets != c.meets(s) {
						t.Fatalf("filter %s: %v marked meets_filter=%v", c.name, s, s.meets)
					}
					delete(pending, s)
				}
			}
		}

		for _, c := range []struct {
			req  *workflow.WatchActionsRequest
			code connect.Code
			frag string
		}{
			{&workflow.WatchActionsRequest{}, connect.CodeInvalidArgument, "run_id"},
			{&workflow.WatchActionsRequest{RunId: rid("", "p", "development", "nope")}, connect.CodeNotFound, ""},
			{&workflow.WatchActionsRequest{RunId: r1, Filter: []*common.Filter{{Field: "created_at", Function: common.Filter_GREATER_THAN, Values: []string{"x"}}}}, connect.CodeInvalidArgument, "created_at"},
			{&workflow.WatchActionsRequest{RunId: r1, Filter: []*common.Filter{{Field: "phase", Function: common.Filter_VALUE_IN, Values: []string{"DONE"}}}}, connect.CodeInvalidArgument, "phase"},
		} {
			wantCode(t, open(t, h.runs.WatchActions, c.req).end(t), c.code, c.frag)
		}
	})
}

// WatchActionDetails and WatchRunDetails send the current details, then
// after every change, and end after the terminal one.
func TestWatchDetails(t *testing.T) {
	eachDatabase(t, autoCreateProjects, func(t *testing.T, h *harness) {
		r1 := rid("", "p", "development", "r1")
		h.createRun(t, r1, "env.main")
		h.enqueue(t, r1, "a0", "c1")
		action := open(t, h.runs.WatchActionDetails, &workflow.WatchActionDetailsRequest{ActionId: &common.ActionIdentifier{Run: r1, Name: "c1"}})
		run := open(t, h.runs.WatchRunDetails, &workflow.WatchRunDetailsRequest{RunId: r1})
		actionPhase := func() common.ActionPhase {
			d := action.next(t).GetDetails()
			if d.GetId().GetName() != "c1" || d.GetSpec() == nil && d.GetTask() == nil {
				t.Fatalf("action details %v, want c1's with its task spec", d)
			}
			return d.GetStatus().GetPhase()
		}
		runPhase := func() common.ActionPhase {
			d := run.next(t).GetDetails()
			if d.GetAction().GetId().GetName() != "a0" || d.GetRunSpec() == nil {
				t.Fatalf("run details %v, want r1's root with its run spec", d)
			}
			return d.GetAction().GetStatus().GetPhase()
		}
		if p := actionPhase(); p != common.ActionPhase_ACTION_PHASE_QUEUED {
			t.Fatalf("c1 starts %v", p)
		}
		if p := runPhase(); p != common.ActionPhase_ACTION_PHASE_QUEUED {
			t.Fatalf("r1 starts %v", p)
		}
		// Changes elsewhere in the run are not the watched action's.
		h.setPhase(t, r1, "a0", phase.Running)
		h.setPhase(t, r1, "c1", phase.Running)
		if p := runPhase(); p != common.ActionPhase_ACTION_PHASE_RUNNING {
			t.Fatalf("r1 then %v, want RUNNING", p)
		}
		if p := actionPhase(); p != common.ActionPhase_ACTION_PHASE_RUNNING {
			t.Fatalf("c1 then %v, want RUNNING", p)
		}
		h.setPhase(t, r1, "c1", phase.Succeeded)
		if p := actionPhase(); p != common.ActionPhase_ACTION_PHASE_SUCCEEDED {
			t.Fatalf("c1 then %v, want SUCCEEDED", p)
		}
		if err := action.end(t); err != nil {
			t.Fatalf("action watch ended with %v after the terminal phase, want a clean end", err)
		}
		h.setPhase(t, r1, "a0", phase.Failed)
		if p := runPhase(); p != common.ActionPhase_ACTION_PHASE_FAILED {
			t.Fatalf("r1 then %v, want FAILED", p)
		}
		if err := run.end(t); err != nil {
			t.Fatalf("run watch ended with %v after the terminal phase, want a clean end", err)
		}
		// A finished action's watch sends its details once and ends.
		again := open(t, h.runs.WatchActionDetails, &workflow.WatchActionDetailsRequest{ActionId: &common.ActionIdentifier{Run: r1, Name: "c1"}})
		if p := again.next(t).GetDetails().GetStatus().GetPhase(); p != common.ActionPhase_ACTION_PHASE_SUCCEEDED {
			t.Fatalf("finished c1: %v", p)
		}
		if err := again.end(t); err != nil {
			t.Fatal(err)
		}

		wantCode(t, open(t, h.runs.WatchActionDetails, &workflow.WatchActionDetailsRequest{ActionId: &common.ActionIdentifier{Run: r1, Name: "nope"}}).end(t), connect.CodeNotFound)
		wantCode(t, open(t, h.runs.WatchActionDetails, &workflow.WatchActionDetailsRequest{}).end(t), connect.CodeInvalidArgument, "action_id")
		wantCode(t, open(t, h.runs.WatchRunDetails, &workflow.WatchRunDetailsRequest{RunId: rid("", "p", "development", "nope")}).end(t), connect.CodeNotFound)
		wantCode(t, open(t, h.runs.WatchRunDetails, &workflow.WatchRunDetailsRequest{RunId: rid("", "", "development", "r1")}).end(t), connect.CodeInvalidArgument, "run_id")
	})
}

// ListActions pages through a run with more than a thousand children
// (more than the largest page) returning every action once, in creation
// order, with no gaps, whatever the page size; filtered by parent it
// returns exactly that parent's children. WatchActions' first messages
// cover the same actions.
func TestListActionsPagesPastAThousandChildren(t *testing.T) {
	eachDatabase(t, autoCreateProjects, func(t *testing.T, h *harness) {
		ctx := context.Background()
		r1 := rid("", "p", "development", "big")
		h.createRun(t, r1, "env.main")
		const children = store.MaxPageSize + 50
		all := []string{"a0"}
		var ofRoot, ofFirst []string
		for i := 0; i < children; i++ {
			name := fmt.Sprintf("c%04d", i)
			h.enqueue(t, r1, "a0", name)
			all, ofRoot = append(all, name), append(ofRoot, name)
			if i%300 == 0 { // grandchildren among the children
				g := fmt.Sprintf("g%04d", i)
				h.enqueue(t, r1, "c0000", g)
				all, ofFirst = append(all, g), append(ofFirst, g)
			}
		}
		list := func(limit uint32, parent string) []string {
			t.Helper()
			var names []string
			req := &common.ListRequest{Limit: limit}
			if parent != "" {
				req.Filters = []*common.Filter{{Field: "parent_name", Function: common.Filter_EQUAL, Values: []string{parent}}}
			}
			for pages := 0; ; pages++ {
				if pages > len(all) {
					t.Fatal("ListActions never ends")
				}
				resp, err := h.runs.ListActions(ctx, connect.NewRequest(&workflow.ListActionsRequest{RunId: r1, Request: req}))
				if err != nil {
					t.Fatal(err)
				}
				if limit > 0 && len(resp.Msg.GetActions()) > int(min(limit, store.MaxPageSize)) {
					t.Fatalf("page of %d actions for limit %d", len(resp.Msg.GetActions()), limit)
				}
				for _, a := range resp.Msg.GetActions() {
					names = append(names, a.GetId().GetName())
				}
				if resp.Msg.GetToken() == "" {
					return names
				}
				req.Token = resp.Msg.GetToken()
			}
		}
		for _, limit := range []uint32{0, 97, store.MaxPageSize, 5000} {
			if got := list(limit, ""); !slices.Equal(got, all) {
				t.Fatalf("limit %d: %d actions listed, want the %d in creation order (first difference at %d)", limit, len(got), len(all), firstDiff(got, all))
			}
		}
		if got := list(250, "a0"); !slices.Equal(got, ofRoot) {
			t.Fatalf("children of a0: %d listed, want %d in order (first difference at %d)", len(got), len(ofRoot), firstDiff(got, ofRoot))
		}
		if got := list(2, "c0000"); !slices.Equal(got, ofFirst) {
			t.Fatalf("children of c0000 = %v, want %v", got, ofFirst)
		}

		watch := open(t, h.runs.WatchActions, &workflow.WatchActionsRequest{RunId: r1})
		var watched []string
		for len(watched) < len(all) {
			for _, e := range watch.next(t).GetEnrichedActions() {
				watched = append(watched, e.GetAction().GetId().GetName())
			}
		}
		if !slices.Equal(watched, all) {
			t.Fatalf("WatchActions' first messages: %d actions, want the %d in order (first difference at %d)", len(watched), len(all), firstDiff(watched, all))
		}
	})
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
