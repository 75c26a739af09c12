package runs_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/rpctest"
	"fmgr.dev/internal/store"
)

// WatchGroups sends the project's groups with the sentinel, then the
// group of a task whose run changed, recomputed; runs of other projects
// never show.
func TestWatchGroups(t *testing.T) {
	eachDatabase(t, autoCreateProjects, func(t *testing.T, h *harness) {
		h.createRun(t, rid("", "p", "development", "a1"), "env.a")
		h.createRun(t, rid("", "p", "development", "a2"), "env.a")
		h.createRun(t, rid("", "p", "development", "b1"), "env.b")
		h.createRun(t, rid("", "q", "development", "elsewhere"), "env.c")
		project := &common.ProjectIdentifier{Name: "p", Domain: "development"}

		w := open(t, h.runs.WatchGroups, &workflow.WatchGroupsRequest{ScopeBy: &workflow.WatchGroupsRequest_ProjectId{ProjectId: project}})
		first := w.next(t)
		if !first.GetSentinel() || len(first.GetTaskGroups()) != 2 {
			t.Fatalf("first message %v, want the two groups of p with the sentinel", first)
		}
		byName := map[string]*workflow.TaskGroup{}
		for _, g := range first.GetTaskGroups() {
			byName[g.GetTaskName()] = g
		}
		a := byName["env.a"]
		if a.GetTotalRuns() != 2 || len(a.GetRecentStatuses()) != 2 || a.GetRecentStatuses()[0].GetRunName() != "a2" ||
			len(a.GetPhaseCounts()) != 1 || a.GetPhaseCounts()[0].GetCount() != 2 || byName["env.b"].GetTotalRuns() != 1 {
			t.Fatalf("groups %v", first.GetTaskGroups())
		}

		// a1 fails with a user error: env.a is sent again with it.
		errInfo, _ := proto.Marshal(&core.ExecutionError{Kind: core.ExecutionError_USER, Message: "boom"})
		if _, err := h.st.Actions.Update(context.Background(), runKeyOf(rid("", "p", "development", "a1")).Action(store.RootName),
			store.AnyVersion, store.Update{Phase: phase.Failed, ErrorInfo: errInfo}); err != nil {
			t.Fatal(err)
		}
		// The creations before the watch may still be on their way to the
		// hub (PostgreSQL notifies after the commit): their groups may be
		// sent again, recomputed, alone or in one message with env.a's.
		// Every group sent is one of p's.
		for failed := false; !failed; {
			m := w.next(t)
			if m.GetSentinel() || len(m.GetTaskGroups()) == 0 {
				t.Fatalf("update %v, want groups without the sentinel", m)
			}
			for _, g := range m.GetTaskGroups() {
				switch g.GetTaskName() {
				case "env.a":
				case "env.b":
					continue
				default:
					t.Fatalf("update %v, want groups of project p", m)
				}
				if g.GetErrorCounts().GetUserError() == 1 {
					if g.GetAverageFailureRate() != 1 || g.GetLatestFinishedTime() == nil {
						t.Fatalf("failed group %v", g)
					}
					failed = true
				}
			}
		}

		// Bad requests: no project, a reversed range, a filter.
		for name, req := range map[string]*workflow.WatchGroupsRequest{
			"no project": {},
			"range": {ScopeBy: &workflow.WatchGroupsRequest_ProjectId{ProjectId: project},
				StartDate: timestamppb.New(time.Now()), EndDate: timestamppb.New(time.Now().Add(-time.Hour))},
			"filter": {ScopeBy: &workflow.WatchGroupsRequest_ProjectId{ProjectId: project},
				Request: &common.ListRequest{Filters: []*common.Filter{{Field: "phase", Function: common.Filter_EQUAL, Values: []string{"FAILED"}}}}},
		} {
			t.Run(name, func(t *testing.T) {
				rpctest.WantCode(t, open(t, h.runs.WatchGroups, req).end(t), connect.CodeInvalidArgument)
			})
		}
	})
}

// GetActionLogContext answers for an existing attempt with the log context
// its history recorded, its cluster and times; a missing action or attempt
// is NOT_FOUND, a bad id INVALID_ARGUMENT.
func TestGetActionLogContext(t *testing.T) {
	eachDatabase(t, autoCreateProjects, func(t *testing.T, h *harness) {
		ctx := context.Background()
		run := rid("", "p", "development", "r1")
		h.createRun(t, run, "env.main")
		key := runKeyOf(run).Action(store.RootName)
		lc := &core.LogContext{PrimaryPodName: "pod-1", Pods: []*core.PodLogContext{{Namespace: "ns", PodName: "pod-1",
			PrimaryContainerName: "task", Containers: []*core.ContainerContext{{ContainerName: "task"}}}}}
		info, _ := proto.Marshal(&workflow.ActionEvent{LogContext: lc, Cluster: "c1"})
		if _, err := h.st.Actions.Update(ctx, key, store.AnyVersion, store.Update{Phase: phase.Running, Cluster: "c1",
			Events: []store.Event{{Attempt: 1, Phase: phase.Running, Info: info}}}); err != nil {
			t.Fatal(err)
		}
		id := &common.ActionIdentifier{Run: run, Name: store.RootName}
		for _, attempt := range []uint32{0, 1} {
			resp, err := h.runs.GetActionLogContext(ctx, connect.NewRequest(&workflow.GetActionLogContextRequest{ActionId: id, Attempt: attempt}))
			if err != nil {
				t.Fatal(err)
			}
			got := resp.Msg
			if got.GetCluster() != "c1" || got.GetStartTime() == nil || got.GetEndTime() != nil ||
				got.GetLogContext().GetPrimaryPodName() != "pod-1" || got.GetLogContext().GetPods()[0].GetContainers()[0].GetProcess().GetContainerStartTime() == nil {
				t.Fatalf("attempt %d: %v", attempt, got)
			}
		}
		_, err := h.runs.GetActionLogContext(ctx, connect.NewRequest(&workflow.GetActionLogContextRequest{ActionId: id, Attempt: 2}))
		rpctest.WantCode(t, err, connect.CodeNotFound, "attempt 2")
		_, err = h.runs.GetActionLogContext(ctx, connect.NewRequest(&workflow.GetActionLogContextRequest{
			ActionId: &common.ActionIdentifier{Run: run, Name: "a9"}}))
		rpctest.WantCode(t, err, connect.CodeNotFound)
		_, err = h.runs.GetActionLogContext(ctx, connect.NewRequest(&workflow.GetActionLogContextRequest{
			ActionId: &common.ActionIdentifier{Run: &common.RunIdentifier{Project: "p"}, Name: "a0"}}))
		rpctest.WantCode(t, err, connect.CodeInvalidArgument)
	})
}
