package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/task/taskconnect"
	"fmgr.dev/gen/go/flyteidl2/workflow"
)

// Scenario 8: bad requests get a clear error with the right code and change
// nothing: no run, no task appears.
func TestBadInput(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			m := startSDKManager(t, b.dsn(t), smallRequestLimitEnv)
			runs := runClient(m)
			tasks := taskconnect.NewTaskServiceClient(rpcClient, m.URL)

			runID := func(name string) *common.RunIdentifier {
				return &common.RunIdentifier{Project: testProject, Domain: testDomain, Name: name}
			}
			missingTask := &task.TaskIdentifier{Project: testProject, Domain: testDomain, Name: "e2e_missing.nothing", Version: "v1"}
			createRun := func(id *common.RunIdentifier, project *common.ProjectIdentifier) error {
				req := createRunWithInputs(stringInputs(8))
				if id != nil {
					req.Id = &workflow.CreateRunRequest_RunId{RunId: id}
				} else {
					req.Id = &workflow.CreateRunRequest_ProjectId{ProjectId: project}
				}
				_, err := runs.CreateRun(ctx, connect.NewRequest(req))
				return err
			}

			baseRuns := listRunNames(t, ctx, m)
			baseTasks := listTaskNames(t, ctx, tasks)

			for _, c := range []struct {
				name string
				code connect.Code
				// mention is what the message must contain: the missing
				// thing, the field at fault, or the limit.
				mention string
				call    func() error
			}{
				{"CreateRun of an unknown task", connect.CodeNotFound, "e2e_missing.nothing", func() error {
					return createRun(nil, projectID())
				}},
				{"GetRunDetails of an unknown run", connect.CodeNotFound, "nosuchrun", func() error {
					_, err := runs.GetRunDetails(ctx, connect.NewRequest(&workflow.GetRunDetailsRequest{RunId: runID("nosuchrun")}))
					return err
				}},
				{"AbortRun of an unknown run", connect.CodeNotFound, "nosuchrun", func() error {
					_, err := runs.AbortRun(ctx, connect.NewRequest(&workflow.AbortRunRequest{RunId: runID("nosuchrun")}))
					return err
				}},
				{"GetTaskDetails of an unknown task", connect.CodeNotFound, "e2e_missing.nothing", func() error {
					_, err := tasks.GetTaskDetails(ctx, connect.NewRequest(&task.GetTaskDetailsRequest{TaskId: missingTask}))
					return err
				}},
				{"CreateRun with a run name that is not a name", connect.CodeInvalidArgument, "run_id.name", func() error {
					return createRun(runID("Bad Name!"), nil)
				}},
				{"CreateRun with a run name over 30 characters", connect.CodeInvalidArgument, "run_id.name", func() error {
					return createRun(runID(strings.Repeat("r", 31)), nil)
				}},
				{"CreateRun without a domain", connect.CodeInvalidArgument, "project_id.domain", func() error {
					return createRun(nil, &common.ProjectIdentifier{Name: testProject})
				}},
				{"GetRunDetails with a path in the project", connect.CodeInvalidArgument, "run_id.project", func() error {
					id := runID("somerun")
					id.Project = "../etc"
					_, err := runs.GetRunDetails(ctx, connect.NewRequest(&workflow.GetRunDetailsRequest{RunId: id}))
					return err
				}},
				{"GetActionDetails without an action name", connect.CodeInvalidArgument, "action_id.name", func() error {
					_, err := runs.GetActionDetails(ctx, connect.NewRequest(&workflow.GetActionDetailsRequest{
						ActionId: &common.ActionIdentifier{Run: runID("somerun")},
					}))
					return err
				}},
				{"DeployTask without a version", connect.CodeInvalidArgument, "task_id.version", func() error {
					id := &task.TaskIdentifier{Project: testProject, Domain: testDomain, Name: "e2e_bad.task"}
					_, err := tasks.DeployTask(ctx, connect.NewRequest(&task.DeployTaskRequest{TaskId: id, Spec: &task.TaskSpec{}}))
					return err
				}},
				{"CreateRun over server.maxRequestBytes", connect.CodeResourceExhausted, "1048576", func() error {
					_, err := runs.CreateRun(ctx, connect.NewRequest(createRunWithInputs(stringInputs(2*smallRequestLimit))))
					return err
				}},
			} {
				err := c.call()
				if code := connectCode(err); code != c.code.String() {
					t.Errorf("%s: %s (%v), want %s", c.name, code, err, c.code)
				} else if msg := err.(*connect.Error).Message(); !strings.Contains(msg, c.mention) {
					t.Errorf("%s: %s message %q does not mention %q", c.name, c.code, msg, c.mention)
				} else {
					t.Logf("%s: %s: %s", c.name, c.code, msg)
				}
				if now := listRunNames(t, ctx, m); !slices.Equal(now, baseRuns) {
					t.Errorf("after %s: ListRuns shows %v, before %v", c.name, now, baseRuns)
				}
				if now := listTaskNames(t, ctx, tasks); !slices.Equal(now, baseTasks) {
					t.Errorf("after %s: ListTasks shows %v, before %v", c.name, now, baseTasks)
				}
			}

			// A good request afterwards is listed: ListRuns would show a bad
			// request's run, had one been created.
			var sub struct{ Run string }
			driver(t, ctx, &sub, "drive_submit.py", sdkEndpoint(m))
			if now := listRunNames(t, ctx, m); !slices.Contains(now, sub.Run) || len(now) != len(baseRuns)+1 {
				t.Errorf("after one good run (%s), ListRuns shows %v, before %v", sub.Run, now, baseRuns)
			}
		})
	}
}

// listRunNames is every run of the test project, by name, sorted.
func listRunNames(t *testing.T, ctx context.Context, m *manager) []string {
	t.Helper()
	var names []string
	token := ""
	for {
		resp, err := runClient(m).ListRuns(ctx, connect.NewRequest(&workflow.ListRunsRequest{
			Request: &common.ListRequest{Limit: 100, Token: token},
			ScopeBy: &workflow.ListRunsRequest_ProjectId{ProjectId: projectID()},
		}))
		if err != nil {
			t.Fatalf("ListRuns: %v", err)
		}
		for _, r := range resp.Msg.GetRuns() {
			names = append(names, r.GetAction().GetId().GetRun().GetName())
		}
		if token = resp.Msg.GetToken(); token == "" {
			break
		}
	}
	slices.Sort(names)
	return names
}

// listTaskNames is every task version of the test project, sorted.
func listTaskNames(t *testing.T, ctx context.Context, tasks taskconnect.TaskServiceClient) []string {
	t.Helper()
	var names []string
	token := ""
	for {
		resp, err := tasks.ListTasks(ctx, connect.NewRequest(&task.ListTasksRequest{
			Request: &common.ListRequest{Limit: 100, Token: token},
			ScopeBy: &task.ListTasksRequest_ProjectId{ProjectId: projectID()},
		}))
		if err != nil {
			t.Fatalf("ListTasks: %v", err)
		}
		for _, tk := range resp.Msg.GetTasks() {
			names = append(names, tk.GetTaskId().GetName()+"@"+tk.GetTaskId().GetVersion())
		}
		if token = resp.Msg.GetToken(); token == "" {
			break
		}
	}
	slices.Sort(names)
	return names
}
