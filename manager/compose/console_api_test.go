package compose_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"fmgr.dev/gen/go/flyteidl2/cluster"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/dataproxy"
	"fmgr.dev/gen/go/flyteidl2/project"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/mgrproc"
	"fmgr.dev/internal/pgtest"
	"fmgr.dev/internal/rpctest"
	"fmgr.dev/internal/sdktest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// Every method the console calls, over Connect JSON against a real
// manager on each database: deploy a task, launch it, list and watch runs
// and groups, read the run's data, logs and log context, the task's
// versions, the launch form, projects' archive and restore, the cluster.
func TestConsoleAPIOverConnectJSON(t *testing.T) {
	bin, err := mgrproc.Build(context.Background(), filepath.Join(t.TempDir(), "flyte-manager"))
	if err != nil {
		t.Fatal(err)
	}
	venv := sdktest.Venv(t)
	dbtest.EachDSN(t, func(t *testing.T, dsn string) {
		p, err := mgrproc.Start(context.Background(), mgrproc.Options{Bin: bin, Home: t.TempDir(), DSN: dsn,
			Env: []string{"FLYTE_MANAGER_EXECUTOR_LOCAL_PYTHON=" + filepath.Join(venv, "bin")}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Stop() })
		consoleCalls(t, rpctest.Browser{T: t, Base: p.URL, Client: mgrproc.HTTPClient})
	})
}

func consoleCalls(t *testing.T, b rpctest.Browser) {
	const proj, dom = "flytesnacks", "development"
	taskID := &task.TaskIdentifier{Project: proj, Domain: dom, Name: "console.hello", Version: "v1"}
	inputs := &core.VariableMap{Variables: []*core.VariableEntry{{Key: "name", Value: &core.Variable{
		Type: &core.LiteralType{Type: &core.LiteralType_Simple{Simple: core.SimpleType_STRING}}, Description: "who to greet"}}}}
	spec := &task.TaskSpec{ShortName: "hello", TaskTemplate: &core.TaskTemplate{
		Id:   &core.Identifier{ResourceType: core.ResourceType_TASK, Project: proj, Domain: dom, Name: taskID.Name, Version: taskID.Version},
		Type: "python", Interface: &core.TypedInterface{Inputs: inputs},
		// No code bundle: a0 fails at once, after writing to its log.
		Target: &core.TaskTemplate_Container{Container: &core.Container{Image: "python", Args: []string{"a0", "--inputs", "{{.input}}"}}},
	}}
	b.Must("flyteidl2.task.TaskService/DeployTask", &task.DeployTaskRequest{TaskId: taskID, Spec: spec}, &task.DeployTaskResponse{})

	// The launch form, and the literals of what the user typed.
	form := &workflow.TaskSpecToLaunchFormJsonResponse{}
	b.Must("flyteidl2.workflow.TranslatorService/TaskSpecToLaunchFormJson", &workflow.TaskSpecToLaunchFormJsonRequest{TaskSpec: spec}, form)
	if p := form.GetJson().GetFields()["properties"].GetStructValue().GetFields()["name"].GetStructValue().AsMap(); p["type"] != "string" || p["description"] != "who to greet" {
		t.Fatalf("launch form property name = %v", p)
	}
	values := &workflow.JsonValuesToLiteralsResponse{}
	b.Must("flyteidl2.workflow.TranslatorService/JsonValuesToLiterals", &workflow.JsonValuesToLiteralsRequest{
		Variables: inputs, Values: mustStruct(t, map[string]any{"name": "World"})}, values)
	if code := b.Call("flyteidl2.workflow.TranslatorService/JsonValuesToLiterals", &workflow.JsonValuesToLiteralsRequest{
		Variables: inputs, Values: mustStruct(t, map[string]any{"name": 5})}, &workflow.JsonValuesToLiteralsResponse{}); code != "invalid_argument" {
		t.Fatalf("a number for a string: %q, want invalid_argument", code)
	}

	runID := &common.RunIdentifier{Project: proj, Domain: dom, Name: "console-r1"}
	b.Must("flyteidl2.workflow.RunService/CreateRun", &workflow.CreateRunRequest{
		Id: &workflow.CreateRunRequest_RunId{RunId: runID}, Task: &workflow.CreateRunRequest_TaskId{TaskId: taskID},
		InputWrapper: &workflow.CreateRunRequest_Inputs{Inputs: &task.Inputs{Literals: values.GetLiterals()}}, Source: workflow.RunSource_RUN_SOURCE_WEB,
	}, &workflow.CreateRunResponse{})
	actionID := &common.ActionIdentifier{Run: runID, Name: "a0"}

	// The run ends (FAILED: there is no code to run); its details stream says so.
	b.Stream("flyteidl2.workflow.RunService/WatchRunDetails", &workflow.WatchRunDetailsRequest{RunId: runID},
		func() proto.Message { return &workflow.WatchRunDetailsResponse{} },
		func(m proto.Message) bool {
			return m.(*workflow.WatchRunDetailsResponse).GetDetails().GetAction().GetStatus().GetPhase() == common.ActionPhase_ACTION_PHASE_FAILED
		})

	// ListRuns with each filter the console sends, newest first.
	scope := &common.ProjectIdentifier{Name: proj, Domain: dom}
	for _, f := range [][]*common.Filter{
		{{Field: "phase", Function: common.Filter_VALUE_IN, Values: []string{"ACTION_PHASE_FAILED", "ACTION_PHASE_SUCCEEDED"}}},
		{{Field: "task_name", Function: common.Filter_EQUAL, Values: []string{taskID.Name}}},
		{{Field: "created_by", Function: common.Filter_EQUAL, Values: []string{"anonymous"}}},
		{{Field: "created_at", Function: common.Filter_GREATER_THAN_OR_EQUAL, Values: []string{time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)}}},
	} {
		runs := &workflow.ListRunsResponse{}
		b.Must("flyteidl2.workflow.RunService/ListRuns", &workflow.ListRunsRequest{ScopeBy: &workflow.ListRunsRequest_ProjectId{ProjectId: scope},
			Request: &common.ListRequest{Limit: 20, Filters: f, SortByFields: []*common.Sort{{Key: "created_at", Direction: common.Sort_DESCENDING}}}}, runs)
		if len(runs.GetRuns()) != 1 || runs.GetRuns()[0].GetAction().GetId().GetRun().GetName() != runID.Name {
			t.Fatalf("ListRuns %v: %v", f, runs.GetRuns())
		}
	}
	b.Must("flyteidl2.workflow.RunService/GetRunDetails", &workflow.GetRunDetailsRequest{RunId: runID}, &workflow.GetRunDetailsResponse{})

	// The streams: runs, actions, one action, groups.
	b.Stream("flyteidl2.workflow.RunService/WatchRuns", &workflow.WatchRunsRequest{Target: &workflow.WatchRunsRequest_ProjectId{ProjectId: scope}},
		func() proto.Message { return &workflow.WatchRunsResponse{} },
		func(m proto.Message) bool { return len(m.(*workflow.WatchRunsResponse).GetRuns()) == 1 })
	b.Stream("flyteidl2.workflow.RunService/WatchActions", &workflow.WatchActionsRequest{RunId: runID},
		func() proto.Message { return &workflow.WatchActionsResponse{} },
		func(m proto.Message) bool { return len(m.(*workflow.WatchActionsResponse).GetEnrichedActions()) == 1 })
	b.Stream("flyteidl2.workflow.RunService/WatchActionDetails", &workflow.WatchActionDetailsRequest{ActionId: actionID},
		func() proto.Message { return &workflow.WatchActionDetailsResponse{} },
		func(m proto.Message) bool {
			return m.(*workflow.WatchActionDetailsResponse).GetDetails().GetId().GetName() == "a0"
		})
	b.Stream("flyteidl2.workflow.RunService/WatchGroups", &workflow.WatchGroupsRequest{
		ScopeBy: &workflow.WatchGroupsRequest_ProjectId{ProjectId: scope}, StartDate: timestamppb.New(time.Now().Add(-time.Hour))},
		func() proto.Message { return &workflow.WatchGroupsResponse{} },
		func(m proto.Message) bool {
			g := m.(*workflow.WatchGroupsResponse)
			if !g.GetSentinel() || len(g.GetTaskGroups()) != 1 || g.GetTaskGroups()[0].GetTaskName() != taskID.Name ||
				g.GetTaskGroups()[0].GetAverageFailureRate() != 1 {
				t.Fatalf("WatchGroups first message %v", g)
			}
			return true
		})

	// The run's data, its launch form filled with its inputs, its logs and log context.
	data := &workflow.GetActionDataResponse{}
	b.Must("flyteidl2.workflow.RunService/GetActionData", &workflow.GetActionDataRequest{ActionId: actionID}, data)
	if got := data.GetInputs().GetLiterals(); len(got) != 1 || got[0].GetValue().GetScalar().GetPrimitive().GetStringValue() != "World" {
		t.Fatalf("GetActionData inputs %v", got)
	}
	b.Must("flyteidl2.dataproxy.DataProxyService/GetActionData", &dataproxy.GetActionDataRequest{ActionId: actionID}, &dataproxy.GetActionDataResponse{})
	filled := &workflow.LiteralsToLaunchFormJsonResponse{}
	b.Must("flyteidl2.workflow.TranslatorService/LiteralsToLaunchFormJson", &workflow.LiteralsToLaunchFormJsonRequest{
		Variables: inputs, Owner: &workflow.LiteralsToLaunchFormJsonRequest_ActionId{ActionId: actionID}}, filled)
	if d := filled.GetJson().GetFields()["properties"].GetStructValue().GetFields()["name"].GetStructValue().GetFields()["default"].GetStringValue(); d != "World" {
		t.Fatalf("relaunch form: %v", filled.GetJson())
	}
	fromForm := &workflow.LaunchFormJsonToLiteralsResponse{}
	b.Must("flyteidl2.workflow.TranslatorService/LaunchFormJsonToLiterals", &workflow.LaunchFormJsonToLiteralsRequest{Json: filled.GetJson()}, fromForm)
	if got := fromForm.GetLiterals(); len(got) != 1 || !proto.Equal(got[0], values.GetLiterals()[0]) {
		t.Fatalf("the filled form's literals %v, want %v", got, values.GetLiterals())
	}
	b.Stream("flyteidl2.dataproxy.DataProxyService/TailLogs", &dataproxy.TailLogsRequest{ActionId: actionID, Attempt: 1},
		func() proto.Message { return &dataproxy.TailLogsResponse{} },
		func(m proto.Message) bool { return len(m.(*dataproxy.TailLogsResponse).GetLogs()) > 0 })
	lc := &workflow.GetActionLogContextResponse{}
	b.Must("flyteidl2.workflow.RunService/GetActionLogContext", &workflow.GetActionLogContextRequest{ActionId: actionID, Attempt: 1}, lc)
	if lc.GetLogContext().GetPrimaryPodName() == "" || lc.GetStartTime() == nil || lc.GetEndTime() == nil {
		t.Fatalf("GetActionLogContext = %v", lc)
	}
	if code := b.Call("flyteidl2.workflow.RunService/GetActionLogContext", &workflow.GetActionLogContextRequest{ActionId: actionID, Attempt: 7}, &workflow.GetActionLogContextResponse{}); code != "not_found" {
		t.Fatalf("a missing attempt: %q, want not_found", code)
	}
	// The attempt wrote no report: the link is refused as such.
	if code := b.Call("flyteidl2.dataproxy.DataProxyService/CreateDownloadLink", &dataproxy.CreateDownloadLinkRequest{
		ArtifactType: dataproxy.ArtifactType_ARTIFACT_TYPE_REPORT,
		Source:       &dataproxy.CreateDownloadLinkRequest_ActionAttemptId{ActionAttemptId: &common.ActionAttemptIdentifier{ActionId: actionID, Attempt: 1}},
	}, &dataproxy.CreateDownloadLinkResponse{}); code != "not_found" {
		t.Fatalf("CreateDownloadLink of a missing report: %q, want not_found", code)
	}
	sel := &cluster.SelectClusterResponse{}
	b.Must("flyteidl2.cluster.ClusterService/SelectCluster", &cluster.SelectClusterRequest{
		Resource: &cluster.SelectClusterRequest_ActionId{ActionId: actionID}, Operation: cluster.SelectClusterRequest_OPERATION_TAIL_LOGS}, sel)
	if !strings.HasPrefix(sel.GetClusterEndpoint(), "http://") {
		t.Fatalf("SelectCluster endpoint %q", sel.GetClusterEndpoint())
	}

	// Tasks: list, versions, details.
	tasks := &task.ListTasksResponse{}
	b.Must("flyteidl2.task.TaskService/ListTasks", &task.ListTasksRequest{ScopeBy: &task.ListTasksRequest_ProjectId{ProjectId: scope}}, tasks)
	if len(tasks.GetTasks()) != 1 {
		t.Fatalf("ListTasks = %v", tasks.GetTasks())
	}
	versions := &task.ListVersionsResponse{}
	b.Must("flyteidl2.task.TaskService/ListVersions", &task.ListVersionsRequest{TaskName: &task.TaskName{Project: proj, Domain: dom, Name: taskID.Name}}, versions)
	if len(versions.GetVersions()) != 1 {
		t.Fatalf("ListVersions = %v", versions.GetVersions())
	}
	b.Must("flyteidl2.task.TaskService/GetTaskDetails", &task.GetTaskDetailsRequest{TaskId: taskID}, &task.GetTaskDetailsResponse{})

	// Projects: create, archive, listed as archived, restore.
	b.Must("flyteidl2.project.ProjectService/CreateProject", &project.CreateProjectRequest{Project: &project.Project{Id: "console-p", Name: "Console"}}, &project.CreateProjectResponse{})
	b.Must("flyteidl2.project.ProjectService/UpdateProject", &project.UpdateProjectRequest{Project: &project.Project{Id: "console-p", Name: "Console", State: project.ProjectState_PROJECT_STATE_ARCHIVED}}, &project.UpdateProjectResponse{})
	got := &project.GetProjectResponse{}
	b.Must("flyteidl2.project.ProjectService/GetProject", &project.GetProjectRequest{Id: "console-p"}, got)
	if got.GetProject().GetState() != project.ProjectState_PROJECT_STATE_ARCHIVED {
		t.Fatalf("archived project reads %v", got.GetProject())
	}
	b.Must("flyteidl2.project.ProjectService/UpdateProject", &project.UpdateProjectRequest{Project: &project.Project{Id: "console-p", Name: "Console", State: project.ProjectState_PROJECT_STATE_ACTIVE}}, &project.UpdateProjectResponse{})
	list := &project.ListProjectsResponse{}
	b.Must("flyteidl2.project.ProjectService/ListProjects", &project.ListProjectsRequest{}, list)
	if !strings.Contains(fmt.Sprint(list.GetProjects()), "console-p") {
		t.Fatalf("ListProjects = %v", list.GetProjects())
	}

	// Abort: a second run, aborted from the console.
	run2 := &common.RunIdentifier{Project: proj, Domain: dom, Name: "console-r2"}
	b.Must("flyteidl2.workflow.RunService/CreateRun", &workflow.CreateRunRequest{
		Id: &workflow.CreateRunRequest_RunId{RunId: run2}, Task: &workflow.CreateRunRequest_TaskId{TaskId: taskID},
		InputWrapper: &workflow.CreateRunRequest_Inputs{Inputs: &task.Inputs{Literals: values.GetLiterals()}}}, &workflow.CreateRunResponse{})
	b.Must("flyteidl2.workflow.RunService/AbortRun", &workflow.AbortRunRequest{RunId: run2}, &workflow.AbortRunResponse{})
	b.Must("flyteidl2.workflow.RunService/AbortAction", &workflow.AbortActionRequest{ActionId: &common.ActionIdentifier{Run: run2, Name: "a0"}}, &workflow.AbortActionResponse{})
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
