package authz

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/actions"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/project"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/authn"
)

func TestAllowedTask(t *testing.T) {
	own := authn.RunScope{Org: "o", Project: "p", Domain: "d", Run: "r1"}
	run := func(p, d, r string) *common.RunIdentifier {
		return &common.RunIdentifier{Org: "o", Project: p, Domain: d, Name: r}
	}
	action := func(r *common.RunIdentifier, name string) *common.ActionIdentifier {
		return &common.ActionIdentifier{Run: r, Name: name}
	}
	enqueue := func(r *common.RunIdentifier) proto.Message {
		return &actions.EnqueueRequest{Action: &actions.Action{ActionId: action(r, "a1")}}
	}
	for name, tc := range map[string]struct {
		proc string
		msg  proto.Message
		want bool
	}{
		"enqueue a child":          {"/flyteidl2.actions.ActionsService/Enqueue", enqueue(run("p", "d", "r1")), true},
		"enqueue into another run": {"/flyteidl2.actions.ActionsService/Enqueue", enqueue(run("p", "d", "r2")), false},
		"other project's run":      {"/flyteidl2.actions.ActionsService/Enqueue", enqueue(run("q", "d", "r1")), false},
		"other domain's run":       {"/flyteidl2.actions.ActionsService/Enqueue", enqueue(run("p", "e", "r1")), false},
		"watch own children":       {"/flyteidl2.actions.ActionsService/WatchForUpdates", &actions.WatchForUpdatesRequest{Filter: &actions.WatchForUpdatesRequest_ParentActionId{ParentActionId: action(run("p", "d", "r1"), "a0")}}, true},
		"read own run":             {"/flyteidl2.workflow.RunService/GetRunDetails", &workflow.GetRunDetailsRequest{RunId: run("p", "d", "r1")}, true},
		"read another run":         {"/flyteidl2.workflow.RunService/GetRunDetails", &workflow.GetRunDetailsRequest{RunId: run("p", "d", "r2")}, false},
		"record own events": {"/flyteidl2.workflow.EventsProxyService/Record", &workflow.RecordRequest{Events: []*workflow.ActionEvent{
			{Id: action(run("p", "d", "r1"), "a1")}}}, true},
		"record another run's events": {"/flyteidl2.workflow.EventsProxyService/Record", &workflow.RecordRequest{Events: []*workflow.ActionEvent{
			{Id: action(run("p", "d", "r1"), "a1")}, {Id: action(run("p", "d", "r2"), "a1")}}}, false},
		"record nothing":        {"/flyteidl2.workflow.EventsProxyService/Record", &workflow.RecordRequest{}, false},
		"own project's task":    {"/flyteidl2.task.TaskService/GetTaskDetails", &task.GetTaskDetailsRequest{TaskId: &task.TaskIdentifier{Project: "p", Domain: "d", Name: "t"}}, true},
		"other project's task":  {"/flyteidl2.task.TaskService/GetTaskDetails", &task.GetTaskDetailsRequest{TaskId: &task.TaskIdentifier{Project: "q", Domain: "d", Name: "t"}}, false},
		"list runs":             {"/flyteidl2.workflow.RunService/ListRuns", &workflow.ListRunsRequest{}, false},
		"create a run":          {"/flyteidl2.workflow.RunService/CreateRun", &workflow.CreateRunRequest{Id: &workflow.CreateRunRequest_RunId{RunId: run("p", "d", "r9")}}, false},
		"deploy a task":         {"/flyteidl2.task.TaskService/DeployTask", &task.DeployTaskRequest{TaskId: &task.TaskIdentifier{Project: "p", Domain: "d", Name: "t"}}, false},
		"administer":            {"/flyteidl2.project.ProjectService/CreateProject", &project.CreateProjectRequest{}, false},
		"whoami":                {"/flyteidl2.auth.IdentityService/UserInfo", nil, true},
		"stream not read yet":   {"/flyteidl2.actions.ActionsService/WatchForUpdates", nil, false},
		"run procedure, no run": {"/flyteidl2.workflow.RunService/ListActions", &workflow.ListActionsRequest{}, false},
		"read a project":        {"/flyteidl2.project.ProjectService/GetProject", &project.GetProjectRequest{Id: "p"}, false},
	} {
		if got := AllowedTask(own, tc.proc, tc.msg); got != tc.want {
			t.Errorf("%s: AllowedTask = %v, want %v", name, got, tc.want)
		}
	}
}

// Every procedure a task may call is routed (has a permission entry), and
// every internal one is either a task's or the manager's alone.
func TestTaskProceduresAreRouted(t *testing.T) {
	for proc := range TaskProcedures {
		if _, ok := Procedures[proc]; !ok {
			t.Errorf("TaskProcedures names %s, which has no permission entry", proc)
		}
	}
	for proc := range Internal {
		if _, ok := Procedures[proc]; !ok {
			t.Errorf("Internal names %s, which has no permission entry", proc)
		}
	}
}
