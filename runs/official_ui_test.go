package runs_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/project"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/rpctest"
)

// The requests of the official Flyte 2 console, as it sends them (Connect
// JSON, its field spellings, its org: the first label of its host name),
// against data the SDK made with no org, in a single-org deployment (the
// default), on both databases; the answers carry what the console reads.
func TestOfficialConsoleRequests(t *testing.T) {
	dbtest.EachDSN(t, func(t *testing.T, dsn string) {
		h := newHarnessOrgs(t, dsn, autoCreateProjects, config.Orgs{Default: config.DefaultOrg})
		b := rpctest.Browser{T: t, Base: h.srv.URL, Client: h.srv.Client()}

		// What an SDK pointed at localhost makes: no org.
		r1 := rid("", "p", "development", "r1")
		h.createRun(t, r1, "env.boom")
		h.createRun(t, rid("", "p", "development", "r2"), "env.quiet")
		h.enqueue(t, r1, "a0", "c1")
		h.enqueue(t, r1, "a0", "c2")
		h.enqueue(t, r1, "c1", "g1")
		h.setPhase(t, r1, "c2", phase.Running)
		for _, name := range []string{"env.main", "env.other", "env.MAIN2"} {
			mustDeploy(t, h, name, "v1")
		}

		// The project picker, on every page.
		projects := &project.ListProjectsResponse{}
		b.CallJSON("flyteidl2.project.ProjectService/ListProjects", []byte(`{"limit":200,"filters":"value_in(state,0;1;2)"}`), projects)
		var names []string
		for _, p := range projects.GetProjects().GetProjects() {
			names = append(names, p.GetId())
			if p.GetOrg() != config.DefaultOrg {
				t.Errorf("project %s has org %q, want the default org", p.GetId(), p.GetOrg())
			}
		}
		if !slices.Contains(names, "p") || !slices.Contains(names, "flytesnacks") {
			t.Fatalf("ListProjects = %v, want p and flytesnacks", names)
		}
		archived := &project.ListProjectsResponse{}
		b.CallJSON("flyteidl2.project.ProjectService/ListProjects", []byte(`{"limit":200,"filters":"value_in(state,1;3)"}`), archived)
		if n := len(archived.GetProjects().GetProjects()); n != 0 {
			t.Fatalf("archived projects = %d, want none", n)
		}

		// The runs list: polled, searched, paused.
		const scope = `"projectId":{"organization":"localhost","domain":"development","name":"p"}`
		listRuns := func(body string) []string {
			t.Helper()
			resp := &workflow.ListRunsResponse{}
			if code, msg := b.CallJSON("flyteidl2.workflow.RunService/ListRuns", []byte(body), resp); code != "" {
				t.Fatalf("ListRuns %s: %s %s", body, code, msg)
			}
			var out []string
			for _, r := range resp.GetRuns() {
				a := r.GetAction()
				if org := a.GetId().GetRun().GetOrg(); org != "localhost" {
					t.Errorf("run %s has org %q, want the console's", a.GetId().GetRun().GetName(), org)
				}
				if s := a.GetMetadata().GetExecutedBy().GetUser().GetId().GetSubject(); s != "anonymous" {
					t.Errorf("run %s executed by %q, want anonymous", a.GetId().GetRun().GetName(), s)
				}
				out = append(out, a.GetId().GetRun().GetName())
			}
			return out
		}
		if got := listRuns(`{"request":{"limit":100,"sortBy":{"key":"created_at"}},` + scope + `}`); !slices.Equal(got, []string{"r2", "r1"}) {
			t.Fatalf("runs = %v, want r2 r1", got)
		}
		since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
		search := fmt.Sprintf(`{"request":{"limit":100,"sortBy":{"key":"created_at"},"filters":[`+
			`{"function":"CONTAINS_CASE_INSENSITIVE","field":"task_name","values":["BOOM"]},`+
			`{"function":"GREATER_THAN_OR_EQUAL","field":"created_at","values":[%q]}]},`+scope+`}`, since)
		if got := listRuns(search); !slices.Equal(got, []string{"r1"}) {
			t.Fatalf("searched runs = %v, want r1", got)
		}
		paused := `{"request":{"limit":100,"sortBy":{"key":"created_at"}},` + scope + `,"pausedActionsOnly":true}`
		if got := listRuns(paused); len(got) != 0 {
			t.Fatalf("paused runs = %v, want none", got)
		}
		h.setPhase(t, r1, "c2", phase.Paused)
		if got := listRuns(paused); !slices.Equal(got, []string{"r1"}) {
			t.Fatalf("paused runs = %v, want r1", got)
		}

		// The tasks list's search box.
		tasks := &task.ListTasksResponse{}
		b.CallJSON("flyteidl2.task.TaskService/ListTasks", []byte(`{"request":{"sortByFields":[{"key":"created_at"}],`+
			`"filters":[{"function":"CONTAINS_CASE_INSENSITIVE","field":"name","values":["ma"]}]},`+
			`"projectId":{"organization":"localhost","domain":"development","name":"flytesnacks"}}`), tasks)
		var taskNames []string
		for _, tk := range tasks.GetTasks() {
			taskNames = append(taskNames, tk.GetTaskId().GetName())
			if tk.GetTaskId().GetOrg() != "localhost" {
				t.Errorf("task %s has org %q", tk.GetTaskId().GetName(), tk.GetTaskId().GetOrg())
			}
		}
		if slices.Sort(taskNames); !slices.Equal(taskNames, []string{"env.MAIN2", "env.main"}) {
			t.Fatalf("tasks = %v, want env.MAIN2 env.main", taskNames)
		}

		// The run page: first without an org, then with the console's.
		for org, want := range map[string]string{"": config.DefaultOrg, "localhost": "localhost"} {
			d := &workflow.GetRunDetailsResponse{}
			b.Must("flyteidl2.workflow.RunService/GetRunDetails", &workflow.GetRunDetailsRequest{RunId: rid(org, "p", "development", "r1")}, d)
			if got := d.GetDetails().GetAction().GetId().GetRun().GetOrg(); got != want {
				t.Errorf("GetRunDetails with org %q answers org %q, want %q", org, got, want)
			}
		}

		// The action tree: every action with the phases below it, then each
		// change with the ancestors whose counts it changed.
		const run = `"runId":{"org":"localhost","project":"p","domain":"development","name":"r1"}`
		type view struct {
			meets  bool
			counts map[int32]int32
		}
		views := map[string]view{}
		watch := func(body string, until func() bool) {
			t.Helper()
			b.StreamJSON("flyteidl2.workflow.RunService/WatchActions", []byte(body),
				func() proto.Message { return &workflow.WatchActionsResponse{} },
				func(m proto.Message) bool {
					for _, e := range m.(*workflow.WatchActionsResponse).GetEnrichedActions() {
						if org := e.GetAction().GetId().GetRun().GetOrg(); org != "localhost" {
							t.Fatalf("action %s has org %q", e.GetAction().GetId().GetName(), org)
						}
						views[e.GetAction().GetId().GetName()] = view{e.GetMeetsFilter(), e.GetChildrenPhaseCounts()}
					}
					return until()
				})
		}
		const queued, running, succeeded, pausedPhase = 1, 4, 5, 9
		counts := func(name string, want map[int32]int32) bool { return maps.Equal(views[name].counts, want) }
		snapshot := true
		watch(`{`+run+`}`, func() bool {
			if snapshot {
				if !counts("a0", map[int32]int32{queued: 2, pausedPhase: 1}) || !counts("c1", map[int32]int32{queued: 1}) ||
					len(views["g1"].counts) != 0 || !views["g1"].meets || len(views) != 4 {
					t.Fatalf("first views %v", views)
				}
				snapshot = false
				h.setPhase(t, r1, "g1", phase.Succeeded)
				return false
			}
			return counts("a0", map[int32]int32{queued: 1, succeeded: 1, pausedPhase: 1}) && counts("c1", map[int32]int32{succeeded: 1})
		})

		// Its search box and status filter: the matches and the path to them.
		clear(views)
		watch(`{`+run+`,"filter":[{"function":"CONTAINS_CASE_INSENSITIVE","field":"NAME","values":["G1"]}]}`, func() bool { return len(views) == 4 })
		meets := func() (out []string) {
			for name, v := range views {
				if v.meets {
					out = append(out, name)
				}
			}
			slices.Sort(out)
			return out
		}
		if got := meets(); !slices.Equal(got, []string{"a0", "c1", "g1"}) {
			t.Fatalf("NAME contains G1: %v meet the filter, want a0 c1 g1", got)
		}
		clear(views)
		snapshot = true
		watch(`{`+run+`,"filter":[{"function":"VALUE_IN","field":"PHASE","values":["5"]}]}`, func() bool {
			if snapshot {
				if got := meets(); !slices.Equal(got, []string{"a0", "c1", "g1"}) {
					t.Fatalf("PHASE in 5: %v meet the filter, want a0 c1 g1", got)
				}
				snapshot = false
				h.setPhase(t, r1, "c2", phase.Running)
				h.setPhase(t, r1, "c2", phase.Succeeded)
				return false
			}
			return views["c2"].meets && counts("a0", map[int32]int32{queued: 1, succeeded: 2})
		})
		code, msg := b.CallJSON("flyteidl2.workflow.RunService/ListRuns", []byte(`{"projectId":{"organization":"no org!","domain":"development","name":"p"}}`), &workflow.ListRunsResponse{})
		if code != "invalid_argument" || !strings.HasPrefix(msg, `project_id.organization "no org!" may only contain letters, digits, '-' and '_' (at most 63)`) {
			t.Fatalf("a bad org: %s %q", code, msg)
		}
	})
}
