package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/project"
	"fmgr.dev/gen/go/flyteidl2/project/projectconnect"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/task/taskconnect"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/gen/go/flyteidl2/workflow/workflowconnect"
	"fmgr.dev/internal/pgtest"
	"fmgr.dev/internal/testkit"
)

// The database outage: PostgreSQL stops while fan-out runs of real SDK tasks
// run (their leaves wait for a release file, so the outage hits running
// work). While it is down, /readyz answers 503 and every RPC that needs the
// database answers Unavailable, never Internal or Unknown; the leaves are
// released and end meanwhile, and the executor must wait rather than fail
// them. PostgreSQL comes back on the same data and address: without any
// help the manager becomes ready again and every run ends SUCCEEDED with
// its exact output, every action having executed exactly once.
//
// FM_RELIABILITY=full runs more and wider runs and a longer outage.
func TestFaultDatabaseOutage(t *testing.T) {
	runs, children, outage := 2, 2, 15*time.Second
	if reliabilityFull() {
		runs, children, outage = 3, 3, time.Minute
	}
	ctx := scenarioContext(t, 20*time.Minute)
	// A server of its own: stopping the shared one would break other tests.
	pg, err := pgtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pg.Halt(); err != nil {
			t.Error(err)
		}
		pg.Stop()
	})
	// Every action holds a slot until released: there must be enough.
	m := startSDKManager(t, pg.DSN("postgres"), fmt.Sprintf("FLYTE_MANAGER_EXECUTOR_LOCAL_MAX_PARALLELISM=%d", runs*(children+1)))
	state := testkit.TaskDir(t)
	release := filepath.Join(state, "release")
	reapFaultTasksOnCleanup(t, state)

	var sub struct {
		Accepted []string
		Errors   []string
	}
	driver(t, ctx, &sub, "../fault/drive_fault.py", "submit", sdkEndpoint(m), state, strconv.Itoa(runs), strconv.Itoa(children), "0", release)
	if len(sub.Accepted) != runs || len(sub.Errors) > 0 {
		t.Fatalf("submitted %v, errors %v", sub.Accepted, sub.Errors)
	}
	// Every action runs: each parent and each of its leaves wrote its .exec.
	if msg := testkit.Poll(5*time.Minute, 200*time.Millisecond, func() string {
		if n := len(readFaultState(t, state, m.Home).execs); n < runs*(children+1) {
			return fmt.Sprintf("%d of %d actions run", n, runs*(children+1))
		}
		return ""
	}); msg != "" {
		t.Fatalf("the runs never got in flight: %s", msg)
	}

	if err := pg.Halt(); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	if msg := testkit.Poll(2*time.Minute, 100*time.Millisecond, func() string {
		if code := readyzStatus(m); code != http.StatusServiceUnavailable {
			return fmt.Sprintf("/readyz answers %d with the database down", code)
		}
		return ""
	}); msg != "" {
		t.Fatal(msg)
	}
	t.Logf("/readyz turned 503 %.1fs after PostgreSQL stopped", time.Since(down).Seconds())

	for name, call := range outageCalls(m, sub.Accepted[0]) {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := call(cctx)
		cancel()
		if connect.CodeOf(err) != connect.CodeUnavailable {
			t.Errorf("%s with the database down: %s, want unavailable", name, connectCode(err))
		} else if msg := err.Error(); strings.Contains(msg, "dial") || strings.Contains(msg, "SQLSTATE") || strings.Contains(msg, "127.0.0.1") {
			t.Errorf("%s: the error leaks driver text: %q", name, msg)
		}
	}

	// The leaves end while the database is down: the executor learns of their
	// end and can record nothing yet.
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if msg := testkit.Poll(5*time.Minute, 200*time.Millisecond, func() string {
		for key, execs := range readFaultState(t, state, m.Home).execs {
			run, action, _ := strings.Cut(key, ".")
			if action == "a0" {
				continue
			}
			for _, e := range execs {
				if len(livePIDs([]int{e.pid}, "RUN_NAME="+run)) > 0 {
					return fmt.Sprintf("leaf %s (pid %d) still runs", key, e.pid)
				}
			}
		}
		return ""
	}); msg != "" {
		t.Fatalf("released leaves did not end: %s", msg)
	}
	// The outage lasts a while longer, so that the executor's retries and
	// its periodic scan fail too; /readyz must not flap meanwhile.
	for time.Since(down) < outage {
		if code := readyzStatus(m); code != http.StatusServiceUnavailable {
			t.Fatalf("/readyz answers %d before PostgreSQL is back", code)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("database down for %.1fs; starting it again", time.Since(down).Seconds())

	if err := pg.Resume(); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	if msg := testkit.Poll(2*time.Minute, 100*time.Millisecond, func() string {
		if code := readyzStatus(m); code != http.StatusOK {
			return fmt.Sprintf("/readyz answers %d after PostgreSQL came back", code)
		}
		return ""
	}); msg != "" {
		t.Fatal(msg)
	}
	t.Logf("/readyz turned 200 %.1fs after PostgreSQL came back", time.Since(up).Seconds())

	var res struct {
		Runs map[string]struct {
			Phase  string
			Output any
		}
	}
	driver(t, ctx, &res, "../fault/drive_fault.py", append([]string{"wait", sdkEndpoint(m)}, sub.Accepted...)...)
	want := float64(children * (children - 1) / 2)
	for _, name := range sub.Accepted {
		if r := res.Runs[name]; r.Phase != "SUCCEEDED" || r.Output != want {
			t.Errorf("run %s ended %s with output %v, want SUCCEEDED with %v", name, r.Phase, r.Output, want)
		}
	}
	st := readFaultState(t, state, m.Home)
	for key, execs := range st.execs {
		if len(execs) != 1 {
			t.Errorf("action %s executed %d times: the outage made it fail or run again", key, len(execs))
		}
	}
	for key, n := range st.overlaps {
		t.Errorf("action %s: %d execution(s) overlapped another", key, n)
	}
}

// readyzStatus is /readyz's status code, 0 when it cannot be reached.
func readyzStatus(m *manager) int {
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Get(m.URL + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// outageCalls are RPCs that all need the database, by name.
func outageCalls(m *manager, run string) map[string]func(context.Context) error {
	client := &http.Client{Timeout: 2 * time.Minute}
	runs := workflowconnect.NewRunServiceClient(client, m.URL)
	tasks := taskconnect.NewTaskServiceClient(client, m.URL)
	projects := projectconnect.NewProjectServiceClient(client, m.URL)
	runID := &common.RunIdentifier{Project: testProject, Domain: testDomain, Name: run}
	return map[string]func(context.Context) error{
		"ListRuns": func(ctx context.Context) error {
			_, err := runs.ListRuns(ctx, connect.NewRequest(&workflow.ListRunsRequest{
				Request: &common.ListRequest{Limit: 10}, ScopeBy: &workflow.ListRunsRequest_ProjectId{ProjectId: projectID()}}))
			return err
		},
		"GetRunDetails": func(ctx context.Context) error {
			_, err := runs.GetRunDetails(ctx, connect.NewRequest(&workflow.GetRunDetailsRequest{RunId: runID}))
			return err
		},
		"GetActionDetails": func(ctx context.Context) error {
			_, err := runs.GetActionDetails(ctx, connect.NewRequest(&workflow.GetActionDetailsRequest{
				ActionId: &common.ActionIdentifier{Run: runID, Name: "a0"}}))
			return err
		},
		"ListActions": func(ctx context.Context) error {
			_, err := runs.ListActions(ctx, connect.NewRequest(&workflow.ListActionsRequest{RunId: runID}))
			return err
		},
		"CreateRun": func(ctx context.Context) error {
			_, err := runs.CreateRun(ctx, connect.NewRequest(createRunWithInputs(stringInputs(8))))
			return err
		},
		"AbortRun of a run that does not exist": func(ctx context.Context) error {
			// Unavailable, not NotFound: the manager cannot know.
			_, err := runs.AbortRun(ctx, connect.NewRequest(&workflow.AbortRunRequest{
				RunId: &common.RunIdentifier{Project: testProject, Domain: testDomain, Name: "nosuchrun"}}))
			return err
		},
		"WatchRunDetails": func(ctx context.Context) error {
			return firstMessage(runs.WatchRunDetails(ctx, connect.NewRequest(&workflow.WatchRunDetailsRequest{RunId: runID})))
		},
		"WatchRuns": func(ctx context.Context) error {
			return firstMessage(runs.WatchRuns(ctx, connect.NewRequest(&workflow.WatchRunsRequest{
				Target: &workflow.WatchRunsRequest_ProjectId{ProjectId: projectID()}})))
		},
		"GetProject": func(ctx context.Context) error {
			_, err := projects.GetProject(ctx, connect.NewRequest(&project.GetProjectRequest{Id: testProject}))
			return err
		},
		"ListProjects": func(ctx context.Context) error {
			_, err := projects.ListProjects(ctx, connect.NewRequest(&project.ListProjectsRequest{Limit: 10}))
			return err
		},
		"GetTaskDetails": func(ctx context.Context) error {
			_, err := tasks.GetTaskDetails(ctx, connect.NewRequest(&task.GetTaskDetailsRequest{TaskId: &task.TaskIdentifier{
				Project: testProject, Domain: testDomain, Name: "wf_fault.leaf", Version: "v1"}}))
			return err
		},
		"ListTasks": func(ctx context.Context) error {
			_, err := tasks.ListTasks(ctx, connect.NewRequest(&task.ListTasksRequest{
				Request: &common.ListRequest{Limit: 10}, ScopeBy: &task.ListTasksRequest_ProjectId{ProjectId: projectID()}}))
			return err
		},
	}
}

// firstMessage is the error a server stream ends with before its first
// message (nil if a message arrives).
func firstMessage[T any](stream *connect.ServerStreamForClient[T], err error) error {
	if err != nil {
		return err
	}
	defer stream.Close()
	if stream.Receive() {
		return nil
	}
	return stream.Err()
}
