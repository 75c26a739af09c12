package runs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/project"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/store"
)

var autoCreate = config.Projects{AutoCreate: true}

func taskID(name, version string) *task.TaskIdentifier {
	return &task.TaskIdentifier{Project: "flytesnacks", Domain: "development", Name: name, Version: version}
}

// taskSpec is a spec shaped like the SDK's: the template names the task.
func taskSpec(id *task.TaskIdentifier, image string) *task.TaskSpec {
	env, short, _ := strings.Cut(id.GetName(), ".")
	return &task.TaskSpec{
		TaskTemplate: &core.TaskTemplate{
			Id: &core.Identifier{
				ResourceType: core.ResourceType_TASK, Org: id.GetOrg(), Project: id.GetProject(),
				Domain: id.GetDomain(), Name: id.GetName(), Version: id.GetVersion(),
			},
			Type:     "python",
			Metadata: &core.TaskMetadata{Retries: &core.RetryStrategy{Retries: 2}},
			Target: &core.TaskTemplate_Container{Container: &core.Container{
				Image: image,
				Args:  []string{"a0", "--inputs", "{{.input}}", "--outputs-path", "{{.outputPrefix}}"},
			}},
		},
		ShortName:     short,
		Environment:   &task.Environment{Name: env, Description: "an environment"},
		Documentation: &task.DocumentationEntity{ShortDescription: "does " + short},
	}
}

func deploy(ctx context.Context, h *harness, id *task.TaskIdentifier, spec *task.TaskSpec) error {
	_, err := h.tasks.DeployTask(ctx, connect.NewRequest(&task.DeployTaskRequest{TaskId: id, Spec: spec}))
	return err
}

func mustDeploy(t *testing.T, h *harness, name, version string) *task.TaskSpec {
	t.Helper()
	id := taskID(name, version)
	spec := taskSpec(id, "img:1")
	if err := deploy(context.Background(), h, id, spec); err != nil {
		t.Fatalf("deploy %s@%s: %v", name, version, err)
	}
	return spec
}

func getTask(ctx context.Context, h *harness, id *task.TaskIdentifier) (*task.TaskDetails, error) {
	resp, err := h.tasks.GetTaskDetails(ctx, connect.NewRequest(&task.GetTaskDetailsRequest{TaskId: id}))
	if err != nil {
		return nil, err
	}
	return resp.Msg.GetDetails(), nil
}

func TestDeployAndGetTask(t *testing.T) {
	eachDatabase(t, autoCreate, func(t *testing.T, h *harness) {
		ctx := context.Background()
		id := taskID("env.main", "v1")
		spec := taskSpec(id, "img:1")
		before := time.Now().Add(-time.Second)
		if err := deploy(ctx, h, id, spec); err != nil {
			t.Fatal(err)
		}
		// The same version and spec again: OK, nothing changes.
		if err := deploy(ctx, h, id, proto.Clone(spec).(*task.TaskSpec)); err != nil {
			t.Fatalf("idempotent redeploy: %v", err)
		}
		// The same version with another spec: AlreadyExists, the first stays.
		err := deploy(ctx, h, id, taskSpec(id, "img:2"))
		wantCode(t, err, connect.CodeAlreadyExists, "env.main", "v1", "different spec", "new version")

		d := must[*task.TaskDetails](t)(getTask(ctx, h, id))
		// A task deployed without an org is named in the default org.
		named := proto.Clone(id).(*task.TaskIdentifier)
		named.Org = config.DefaultOrg
		if !proto.Equal(d.GetTaskId(), named) {
			t.Errorf("task_id = %v, want %v", d.GetTaskId(), named)
		}
		if !proto.Equal(d.GetSpec(), spec) {
			t.Errorf("spec did not round-trip:\n got %v\nwant %v", d.GetSpec(), spec)
		}
		md := d.GetMetadata()
		if md.GetShortName() != "main" || md.GetEnvironmentName() != "env" || md.GetShortDescription() != "does main" {
			t.Errorf("metadata = %v", md)
		}
		if at := md.GetDeployedAt().AsTime(); at.Before(before) || at.After(time.Now().Add(time.Second)) {
			t.Errorf("deployed_at = %v", at)
		}
		if md.GetDeployedBy() != nil {
			t.Errorf("deployed_by = %v, want unset without authentication", md.GetDeployedBy())
		}

		// One spec row, shared by the idempotent redeploy.
		tk := must[*store.Task](t)(h.st.Tasks.Get(ctx, store.TaskID{Project: "flytesnacks", Domain: "development", Name: "env.main", Version: "v1"}))
		b := must[[]byte](t)(h.st.Tasks.GetSpec(ctx, tk.SpecDigest))
		if store.SpecDigest(b) != tk.SpecDigest {
			t.Errorf("stored spec does not match its digest")
		}

		// Unknown versions and names are NotFound, naming what was asked.
		_, err = getTask(ctx, h, taskID("env.main", "v9"))
		wantCode(t, err, connect.CodeNotFound, "env.main", "v9")
		_, err = getTask(ctx, h, taskID("env.nope", "v1"))
		wantCode(t, err, connect.CodeNotFound, "env.nope")
	})
}

func TestDeployTaskOrgs(t *testing.T) {
	eachDatabase(t, autoCreate, func(t *testing.T, h *harness) {
		ctx := context.Background()
		// Empty org (an SDK pointed at localhost) and a named org are
		// separate namespaces for the same project/name/version.
		local := taskID("env.main", "v1")
		acme := taskID("env.main", "v1")
		acme.Org = "acme"
		if err := deploy(ctx, h, local, taskSpec(local, "img:local")); err != nil {
			t.Fatal(err)
		}
		if err := deploy(ctx, h, acme, taskSpec(acme, "img:acme")); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			id    *task.TaskIdentifier
			image string
			org   string
		}{{local, "img:local", config.DefaultOrg}, {acme, "img:acme", "acme"}} {
			d := must[*task.TaskDetails](t)(getTask(ctx, h, c.id))
			if got := d.GetSpec().GetTaskTemplate().GetContainer().GetImage(); got != c.image || d.GetTaskId().GetOrg() != c.org {
				t.Errorf("org %q: image %q org %q", c.id.GetOrg(), got, d.GetTaskId().GetOrg())
			}
		}
		// The acme project was created on first use.
		p := must[*connect.Response[project.GetProjectResponse]](t)(h.project.GetProject(ctx,
			connect.NewRequest(&project.GetProjectRequest{Id: "flytesnacks", Org: "acme"})))
		if p.Msg.GetProject().GetOrg() != "acme" {
			t.Errorf("project = %v", p.Msg.GetProject())
		}
	})
}

func TestDeployTaskRejects(t *testing.T) {
	eachDatabase(t, autoCreate, func(t *testing.T, h *harness) {
		ctx := context.Background()
		good := taskID("env.main", "v1")
		with := func(mut func(id *task.TaskIdentifier, spec *task.TaskSpec, req *task.DeployTaskRequest)) *task.DeployTaskRequest {
			id := proto.Clone(good).(*task.TaskIdentifier)
			req := &task.DeployTaskRequest{TaskId: id, Spec: taskSpec(id, "img:1")}
			mut(req.TaskId, req.Spec, req)
			return req
		}
		for _, c := range []struct {
			name      string
			req       *task.DeployTaskRequest
			fragments []string
		}{
			{"no task_id", with(func(_ *task.TaskIdentifier, _ *task.TaskSpec, r *task.DeployTaskRequest) { r.TaskId = nil }),
				[]string{"task_id is required"}},
			{"no project", with(func(id *task.TaskIdentifier, _ *task.TaskSpec, _ *task.DeployTaskRequest) { id.Project = "" }),
				[]string{"task_id.project is required"}},
			{"no domain", with(func(id *task.TaskIdentifier, _ *task.TaskSpec, _ *task.DeployTaskRequest) { id.Domain = "" }),
				[]string{"task_id.domain is required"}},
			{"no version", with(func(id *task.TaskIdentifier, _ *task.TaskSpec, _ *task.DeployTaskRequest) { id.Version = "" }),
				[]string{"task_id.version is required"}},
			{"bad name", with(func(id *task.TaskIdentifier, _ *task.TaskSpec, _ *task.DeployTaskRequest) { id.Name = "env/../main" }),
				[]string{"task_id.name", "env/../main"}},
			{"bad org", with(func(id *task.TaskIdentifier, _ *task.TaskSpec, _ *task.DeployTaskRequest) { id.Org = "a b" }),
				[]string{"task_id.org"}},
			{"unknown domain", with(func(id *task.TaskIdentifier, s *task.TaskSpec, _ *task.DeployTaskRequest) {
				id.Domain, s.TaskTemplate.Id.Domain = "qa", "qa"
			}), []string{"task_id.domain", `"qa"`, "development"}},
			{"no spec", with(func(_ *task.TaskIdentifier, _ *task.TaskSpec, r *task.DeployTaskRequest) { r.Spec = nil }),
				[]string{"spec is required"}},
			{"no template", with(func(_ *task.TaskIdentifier, s *task.TaskSpec, _ *task.DeployTaskRequest) { s.TaskTemplate = nil }),
				[]string{"spec.task_template is required"}},
			{"template names another task", with(func(_ *task.TaskIdentifier, s *task.TaskSpec, _ *task.DeployTaskRequest) {
				s.TaskTemplate.Id.Name = "env.other"
			}), []string{"spec.task_template.id.name", "env.other", "task_id.name"}},
			{"template names another version", with(func(_ *task.TaskIdentifier, s *task.TaskSpec, _ *task.DeployTaskRequest) {
				s.TaskTemplate.Id.Version = "v2"
			}), []string{"spec.task_template.id.version", `"v2"`}},
			{"the built-in image builder", with(func(id *task.TaskIdentifier, s *task.TaskSpec, _ *task.DeployTaskRequest) {
				id.Project, id.Domain, id.Name = "system", "production", "build-image"
				s.TaskTemplate.Id.Project, s.TaskTemplate.Id.Domain, s.TaskTemplate.Id.Name = "system", "production", "build-image"
			}), []string{"build-image", "built-in image builder"}},
			{"triggers", with(func(_ *task.TaskIdentifier, _ *task.TaskSpec, r *task.DeployTaskRequest) {
				r.Triggers = []*task.TaskTrigger{{Name: "nightly"}}
			}), []string{"triggers are not supported here", `"nightly"`}},
		} {
			t.Run(c.name, func(t *testing.T) {
				_, err := h.tasks.DeployTask(ctx, connect.NewRequest(c.req))
				wantCode(t, err, connect.CodeInvalidArgument, c.fragments...)
			})
		}
		// A template without an id is stored as sent.
		id := taskID("env.anon", "v1")
		spec := taskSpec(id, "img:1")
		spec.TaskTemplate.Id = nil
		if err := deploy(ctx, h, id, spec); err != nil {
			t.Fatal(err)
		}
		// Nothing of the rejected requests was stored.
		rows, _, err := h.st.Tasks.List(ctx, store.TaskFilter{}, store.Page{})
		if err != nil || len(rows) != 1 {
			t.Fatalf("stored tasks = %d, %v; want only env.anon", len(rows), err)
		}
		_, err = getTask(ctx, h, &task.TaskIdentifier{Project: "flytesnacks", Domain: "development", Name: "env.main"})
		wantCode(t, err, connect.CodeInvalidArgument, "task_id.version is required")
	})
}

func TestDeployTaskProjects(t *testing.T) {
	ctx := context.Background()
	t.Run("autoCreate", func(t *testing.T) {
		eachDatabase(t, autoCreate, func(t *testing.T, h *harness) {
			id := taskID("env.main", "v1")
			id.Project = "fresh"
			if err := deploy(ctx, h, id, taskSpec(id, "img")); err != nil {
				t.Fatal(err)
			}
			if _, err := h.st.Projects.Get(ctx, "", "fresh"); err != nil {
				t.Fatalf("project not created: %v", err)
			}
		})
	})
	t.Run("no autoCreate", func(t *testing.T) {
		eachDatabase(t, config.Projects{}, func(t *testing.T, h *harness) {
			id := taskID("env.main", "v1")
			id.Project = "fresh"
			err := deploy(ctx, h, id, taskSpec(id, "img"))
			wantCode(t, err, connect.CodeNotFound, `project "fresh" does not exist`, "autoCreate")
			// The seeded default project works.
			if err := deploy(ctx, h, taskID("env.main", "v1"), taskSpec(taskID("env.main", "v1"), "img")); err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Run("archived", func(t *testing.T) {
		eachDatabase(t, autoCreate, func(t *testing.T, h *harness) {
			p := must[*store.Project](t)(h.st.Projects.Get(ctx, "", "flytesnacks"))
			p.State = store.ProjectArchived
			if err := h.st.Projects.Update(ctx, p); err != nil {
				t.Fatal(err)
			}
			id := taskID("env.main", "v1")
			err := deploy(ctx, h, id, taskSpec(id, "img"))
			wantCode(t, err, connect.CodeFailedPrecondition, `project "flytesnacks" is archived`)
		})
	})
}

func listTasks(ctx context.Context, h *harness, req *task.ListTasksRequest) (*task.ListTasksResponse, error) {
	resp, err := h.tasks.ListTasks(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

func inProject(project string) *task.ListTasksRequest_ProjectId {
	return &task.ListTasksRequest_ProjectId{ProjectId: &common.ProjectIdentifier{Name: project, Domain: "development"}}
}

func nameIs(name string) *common.Filter {
	return &common.Filter{Function: common.Filter_EQUAL, Field: "name", Values: []string{name}}
}

func TestListTasks(t *testing.T) {
	eachDatabase(t, autoCreate, func(t *testing.T, h *harness) {
		ctx := context.Background()
		const versions = 23
		for i := range versions {
			mustDeploy(t, h, "env.main", fmt.Sprintf("v%02d", i))
			if i%5 == 0 {
				mustDeploy(t, h, "env.helper", fmt.Sprintf("h%02d", i))
			}
		}
		mustDeploy(t, h, "other.job", "v1")
		elsewhere := taskID("env.main", "x1")
		elsewhere.Project = "elsewhere"
		if err := deploy(ctx, h, elsewhere, taskSpec(elsewhere, "img")); err != nil {
			t.Fatal(err)
		}

		// What Task.get(name, auto_version="latest") sends.
		latest := must[*task.ListTasksResponse](t)(listTasks(ctx, h, &task.ListTasksRequest{
			ScopeBy: inProject("flytesnacks"),
			Request: &common.ListRequest{
				Limit:   1,
				SortBy:  &common.Sort{Key: "created_at", Direction: common.Sort_DESCENDING},
				Filters: []*common.Filter{nameIs("env.main")},
			},
		}))
		if len(latest.GetTasks()) != 1 || latest.GetTasks()[0].GetTaskId().GetVersion() != fmt.Sprintf("v%02d", versions-1) {
			t.Fatalf("latest = %v", latest.GetTasks())
		}
		if latest.GetToken() == "" {
			t.Errorf("a first page of one of %d versions has no token", versions)
		}
		got := latest.GetTasks()[0]
		if md := got.GetMetadata(); md.GetShortName() != "main" || md.GetEnvironmentName() != "env" || md.GetDeployedAt() == nil {
			t.Errorf("metadata = %v", md)
		}

		// Paging over every version of a name returns each once, newest
		// first, also while new versions are deployed between pages.
		var seen []string
		token := ""
		for page := 0; ; page++ {
			resp := must[*task.ListTasksResponse](t)(listTasks(ctx, h, &task.ListTasksRequest{
				ScopeBy: inProject("flytesnacks"),
				Request: &common.ListRequest{Limit: 4, Token: token, Filters: []*common.Filter{nameIs("env.main")}},
			}))
			if len(resp.GetTasks()) > 4 {
				t.Fatalf("page of %d tasks for limit 4", len(resp.GetTasks()))
			}
			for _, tk := range resp.GetTasks() {
				seen = append(seen, tk.GetTaskId().GetVersion())
			}
			if page == 1 {
				mustDeploy(t, h, "env.main", "zz-late")
			}
			if token = resp.GetToken(); token == "" {
				break
			}
		}
		if len(seen) != versions {
			t.Fatalf("paged %d versions, want %d: %v", len(seen), versions, seen)
		}
		for i, v := range seen {
			if want := fmt.Sprintf("v%02d", versions-1-i); v != want {
				t.Fatalf("version %d = %s, want %s (newest first): %v", i, v, want, seen)
			}
		}

		// The project listing holds every task of the project only.
		all := collectTasks(t, h, &task.ListTasksRequest{ScopeBy: inProject("flytesnacks")}, 7)
		if want := versions + 1 + 5 + 1; len(all) != want {
			t.Fatalf("project listing has %d tasks, want %d", len(all), want)
		}
		for _, tk := range all {
			if tk.GetTaskId().GetProject() != "flytesnacks" {
				t.Fatalf("task of another project listed: %v", tk.GetTaskId())
			}
		}
		// The org scope spans projects.
		if org := collectTasks(t, h, &task.ListTasksRequest{ScopeBy: &task.ListTasksRequest_Org{Org: ""}}, 50); len(org) != len(all)+1 {
			t.Fatalf("org listing has %d tasks, want %d", len(org), len(all)+1)
		}

		// An environment's tasks (the SDK's by_task_env: name CONTAINS "<env>.").
		env := collectTasks(t, h, &task.ListTasksRequest{ScopeBy: inProject("flytesnacks"), Request: &common.ListRequest{
			Filters: []*common.Filter{{Function: common.Filter_CONTAINS, Field: "name", Values: []string{"other."}}},
		}}, 5)
		if len(env) != 1 || env[0].GetTaskId().GetName() != "other.job" {
			t.Fatalf("tasks of env other: %v", env)
		}

		// Bad requests name what is wrong.
		_, err := listTasks(ctx, h, &task.ListTasksRequest{Request: &common.ListRequest{
			Filters: []*common.Filter{{Function: common.Filter_EQUAL, Field: "image", Values: []string{"x"}}},
		}})
		wantCode(t, err, connect.CodeInvalidArgument, `"image"`)
		_, err = listTasks(ctx, h, &task.ListTasksRequest{ScopeBy: &task.ListTasksRequest_ProjectId{ProjectId: &common.ProjectIdentifier{Name: "flytesnacks"}}})
		wantCode(t, err, connect.CodeInvalidArgument, "project_id.domain is required")
		_, err = listTasks(ctx, h, &task.ListTasksRequest{Request: &common.ListRequest{Token: "garbage"}})
		wantCode(t, err, connect.CodeInvalidArgument, "page token")
	})
}

// collectTasks pages through a listing with the given page size.
func collectTasks(t *testing.T, h *harness, req *task.ListTasksRequest, limit uint32) []*task.Task {
	t.Helper()
	var out []*task.Task
	req = proto.Clone(req).(*task.ListTasksRequest)
	if req.Request == nil {
		req.Request = &common.ListRequest{}
	}
	req.Request.Limit = limit
	for {
		resp := must[*task.ListTasksResponse](t)(listTasks(context.Background(), h, req))
		out = append(out, resp.GetTasks()...)
		if resp.GetToken() == "" {
			return out
		}
		req.Request.Token = resp.GetToken()
	}
}

func TestListTasksKnownFiltersAndLatestRun(t *testing.T) {
	eachDatabase(t, autoCreate, func(t *testing.T, h *harness) {
		ctx := context.Background()
		for _, c := range []struct {
			name       string
			entrypoint bool
		}{{"env.main", true}, {"env.helper", false}} {
			id := taskID(c.name, "v1")
			spec := taskSpec(id, "img")
			spec.TaskTemplate.Metadata.IsEntrypoint = c.entrypoint
			if err := deploy(ctx, h, id, spec); err != nil {
				t.Fatal(err)
			}
		}
		entry := func(is bool) *task.ListTasksRequest_KnownFilter {
			return &task.ListTasksRequest_KnownFilter{FilterBy: &task.ListTasksRequest_KnownFilter_IsEntrypoint{IsEntrypoint: is}}
		}
		for is, want := range map[bool]string{true: "env.main", false: "env.helper"} {
			got := collectTasks(t, h, &task.ListTasksRequest{ScopeBy: inProject("flytesnacks"),
				KnownFilters: []*task.ListTasksRequest_KnownFilter{entry(is)}}, 1)
			if len(got) != 1 || got[0].GetTaskId().GetName() != want {
				t.Errorf("is_entrypoint=%v: %v", is, got)
			}
		}
		byNobody := collectTasks(t, h, &task.ListTasksRequest{KnownFilters: []*task.ListTasksRequest_KnownFilter{
			{FilterBy: &task.ListTasksRequest_KnownFilter_DeployedBy{DeployedBy: "someone"}},
		}}, 10)
		if len(byNobody) != 0 {
			t.Errorf("deployed_by someone: %v", byNobody)
		}

		// A run of env.main@v1 shows as its latest run.
		start := time.Now().Add(-time.Second)
		for _, run := range []string{"r1", "r2"} {
			_, err := h.st.Actions.CreateRun(ctx, store.NewAction{
				Key:        store.RunKey{Project: "flytesnacks", Domain: "development", RunName: run}.Action(store.RootName),
				ActionType: store.ActionTypeTask,
				Task:       store.TaskID{Project: "flytesnacks", Domain: "development", Name: "env.main", Version: "v1"},
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		tasks := collectTasks(t, h, &task.ListTasksRequest{ScopeBy: inProject("flytesnacks")}, 10)
		for _, tk := range tasks {
			lr := tk.GetTaskSummary().GetLatestRun()
			switch tk.GetTaskId().GetName() {
			case "env.main":
				if lr.GetRunId().GetName() != "r2" || lr.GetPhase() != common.ActionPhase_ACTION_PHASE_QUEUED ||
					lr.GetRootTaskName() != "env.main" || lr.GetRunTime().AsTime().Before(start) {
					t.Errorf("latest run of env.main = %v", lr)
				}
			default:
				if tk.TaskSummary != nil {
					t.Errorf("%s has a task summary without runs: %v", tk.GetTaskId().GetName(), tk.TaskSummary)
				}
			}
		}
		// ListVersions carries it too.
		vs := must[*connect.Response[task.ListVersionsResponse]](t)(h.tasks.ListVersions(ctx, connect.NewRequest(&task.ListVersionsRequest{
			TaskName: &task.TaskName{Project: "flytesnacks", Domain: "development", Name: "env.main"},
		})))
		if v := vs.Msg.GetVersions(); len(v) != 1 || v[0].GetLatestRun().GetRunId().GetName() != "r2" {
			t.Errorf("versions = %v", v)
		}
	})
}

func TestListVersions(t *testing.T) {
	eachDatabase(t, autoCreate, func(t *testing.T, h *harness) {
		ctx := context.Background()
		const n = 11
		for i := range n {
			mustDeploy(t, h, "env.main", fmt.Sprintf("v%02d", i))
		}
		mustDeploy(t, h, "env.other", "v1")
		var got []string
		req := &task.ListVersionsRequest{
			TaskName: &task.TaskName{Project: "flytesnacks", Domain: "development", Name: "env.main"},
			Request:  &common.ListRequest{Limit: 3},
		}
		for {
			resp := must[*connect.Response[task.ListVersionsResponse]](t)(h.tasks.ListVersions(ctx, connect.NewRequest(req)))
			for _, v := range resp.Msg.GetVersions() {
				if v.GetDeployedAt() == nil {
					t.Errorf("version %s has no deployed_at", v.GetVersion())
				}
				got = append(got, v.GetVersion())
			}
			if req.Request.Token = resp.Msg.GetToken(); req.Request.Token == "" {
				break
			}
		}
		if len(got) != n || got[0] != fmt.Sprintf("v%02d", n-1) || got[n-1] != "v00" {
			t.Fatalf("versions = %v, want %d newest first", got, n)
		}
		_, err := h.tasks.ListVersions(ctx, connect.NewRequest(&task.ListVersionsRequest{
			TaskName: &task.TaskName{Project: "flytesnacks", Name: "env.main"},
		}))
		wantCode(t, err, connect.CodeInvalidArgument, "task_name.domain is required")
		_, err = h.tasks.ListVersions(ctx, connect.NewRequest(&task.ListVersionsRequest{}))
		wantCode(t, err, connect.CodeInvalidArgument, "task_name is required")
		empty := must[*connect.Response[task.ListVersionsResponse]](t)(h.tasks.ListVersions(ctx, connect.NewRequest(&task.ListVersionsRequest{
			TaskName: &task.TaskName{Project: "flytesnacks", Domain: "development", Name: "env.none"},
		})))
		if len(empty.Msg.GetVersions()) != 0 || empty.Msg.GetToken() != "" {
			t.Errorf("versions of an unknown task = %v", empty.Msg)
		}
	})
}

// A task whose code bundle lies in the manager's storage but is gone from
// it (the SDK's client cache named a bundle a wiped data directory lost) is
// refused, naming the bundle and the cache; once the bundle is uploaded
// again, deploying succeeds. A bundle elsewhere is not checked.
func TestDeployTaskMissingCodeBundle(t *testing.T) {
	eachDatabase(t, autoCreate, func(t *testing.T, h *harness) {
		ctx := context.Background()
		blobs := h.state.Blobs()
		const key = "uploads/_/flytesnacks/development/abc/fastabc.tar.gz"
		withBundle := func(name, uri string) (*task.TaskIdentifier, *task.TaskSpec) {
			id := taskID(name, "v1")
			spec := taskSpec(id, "img:1")
			c := spec.GetTaskTemplate().GetContainer()
			c.Args = append(c.Args, "--tgz", uri, "--dest", ".")
			return id, spec
		}
		id, spec := withBundle("env.main", blobs.URI(key))
		err := deploy(ctx, h, id, spec)
		wantCode(t, err, connect.CodeFailedPrecondition, "task env.main version v1 names the code bundle "+blobs.URI(key),
			"does not exist in this manager's storage", "`flyte delete local-cache`", "deploy again")
		if rows, _, err := h.st.Tasks.List(ctx, store.TaskFilter{}, store.Page{}); err != nil || len(rows) != 0 {
			t.Fatalf("stored tasks = %d, %v; want none", len(rows), err)
		}
		if err := blobs.Put(ctx, key, []byte("bundle"), nil); err != nil {
			t.Fatal(err)
		}
		if err := deploy(ctx, h, id, spec); err != nil {
			t.Fatalf("deploy with the bundle uploaded again: %v", err)
		}
		if id, spec := withBundle("env.elsewhere", "s3://elsewhere/fast.tar.gz"); deploy(ctx, h, id, spec) != nil {
			t.Fatal("deploy with a bundle elsewhere was refused")
		}
	})
}
