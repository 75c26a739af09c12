package runs_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/project"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/config"
)

func getProject(ctx context.Context, h *harness, org, id string) (*project.Project, error) {
	resp, err := h.project.GetProject(ctx, connect.NewRequest(&project.GetProjectRequest{Id: id, Org: org}))
	if err != nil {
		return nil, err
	}
	return resp.Msg.GetProject(), nil
}

func listProjects(t *testing.T, h *harness, req *project.ListProjectsRequest) []string {
	t.Helper()
	var out []string
	for {
		resp := must[*connect.Response[project.ListProjectsResponse]](t)(h.project.ListProjects(context.Background(), connect.NewRequest(req)))
		for _, p := range resp.Msg.GetProjects().GetProjects() {
			out = append(out, p.GetId())
		}
		if req.Token = resp.Msg.GetProjects().GetToken(); req.Token == "" {
			return out
		}
	}
}

func TestProjectsCRUD(t *testing.T) {
	eachDatabase(t, autoCreate, func(t *testing.T, h *harness) {
		ctx := context.Background()
		// What Project.create sends.
		_, err := h.project.CreateProject(ctx, connect.NewRequest(&project.CreateProjectRequest{Project: &project.Project{
			Id: "ml", Name: "Machine learning", Description: "models", Labels: &task.Labels{Values: map[string]string{"team": "ml"}},
		}}))
		if err != nil {
			t.Fatal(err)
		}
		_, err = h.project.CreateProject(ctx, connect.NewRequest(&project.CreateProjectRequest{Project: &project.Project{Id: "ml"}}))
		wantCode(t, err, connect.CodeAlreadyExists, `project "ml" already exists`)

		p := must[*project.Project](t)(getProject(ctx, h, "", "ml"))
		if p.GetId() != "ml" || p.GetName() != "Machine learning" || p.GetDescription() != "models" ||
			p.GetState() != project.ProjectState_PROJECT_STATE_ACTIVE || p.GetOrg() != config.DefaultOrg ||
			!reflect.DeepEqual(p.GetLabels().GetValues(), map[string]string{"team": "ml"}) {
			t.Fatalf("project = %v", p)
		}
		var domains []string
		for _, d := range p.GetDomains() {
			domains = append(domains, d.GetId()+"="+d.GetName())
		}
		if fmt.Sprint(domains) != "[development=development staging=staging production=production]" {
			t.Errorf("domains = %v", domains)
		}

		// What Project.update / archive sends: the project read back,
		// domains cleared, fields changed.
		p.Domains = nil
		p.Description = "all models"
		p.State = project.ProjectState_PROJECT_STATE_ARCHIVED
		p.Labels = nil
		must[*connect.Response[project.UpdateProjectResponse]](t)(h.project.UpdateProject(ctx, connect.NewRequest(&project.UpdateProjectRequest{Project: p})))
		got := must[*project.Project](t)(getProject(ctx, h, "", "ml"))
		if got.GetDescription() != "all models" || got.GetState() != project.ProjectState_PROJECT_STATE_ARCHIVED ||
			got.GetLabels() != nil || got.GetName() != "Machine learning" {
			t.Fatalf("updated project = %v", got)
		}
		// Sending the domains back unchanged is accepted too.
		got.State = project.ProjectState_PROJECT_STATE_ACTIVE
		must[*connect.Response[project.UpdateProjectResponse]](t)(h.project.UpdateProject(ctx, connect.NewRequest(&project.UpdateProjectRequest{Project: got})))

		_, err = h.project.UpdateProject(ctx, connect.NewRequest(&project.UpdateProjectRequest{Project: &project.Project{Id: "nope"}}))
		wantCode(t, err, connect.CodeNotFound, `project "nope" not found`)
		_, err = getProject(ctx, h, "", "nope")
		wantCode(t, err, connect.CodeNotFound, `project "nope" not found`)
		_, err = getProject(ctx, h, "acme", "ml")
		wantCode(t, err, connect.CodeNotFound, `project "ml" not found`)

		for _, c := range []struct {
			name      string
			p         *project.Project
			fragments []string
		}{
			{"nil", nil, []string{"project is required"}},
			{"no id", &project.Project{Name: "x"}, []string{"project.id is required"}},
			{"bad id", &project.Project{Id: "a/b"}, []string{"project.id", `"a/b"`}},
			{"long id", &project.Project{Id: strings.Repeat("p", 64)}, []string{"project.id", "63"}},
			{"bad org", &project.Project{Id: "ok", Org: "a b"}, []string{"project.org"}},
			{"long description", &project.Project{Id: "ok", Description: strings.Repeat("d", 301)}, []string{"project.description", "300"}},
			{"bad state", &project.Project{Id: "ok", State: 7}, []string{"project.state 7"}},
			{"own domains", &project.Project{Id: "ok", Domains: []*project.Domain{{Id: "qa"}}}, []string{"project.domains", `"qa"`, "global"}},
		} {
			_, err := h.project.CreateProject(ctx, connect.NewRequest(&project.CreateProjectRequest{Project: c.p}))
			wantCode(t, err, connect.CodeInvalidArgument, c.fragments...)
		}
		_, err = getProject(ctx, h, "", "")
		wantCode(t, err, connect.CodeInvalidArgument, "id is required")

		// A project's display name defaults to its id.
		must[*connect.Response[project.CreateProjectResponse]](t)(h.project.CreateProject(ctx,
			connect.NewRequest(&project.CreateProjectRequest{Project: &project.Project{Id: "plain", Org: "acme"}})))
		if p := must[*project.Project](t)(getProject(ctx, h, "acme", "plain")); p.GetName() != "plain" || p.GetOrg() != "acme" {
			t.Errorf("project = %v", p)
		}
	})
}

func TestListProjects(t *testing.T) {
	eachDatabase(t, autoCreate, func(t *testing.T, h *harness) {
		ctx := context.Background()
		for i := range 12 {
			p := &project.Project{Id: fmt.Sprintf("p%02d", i)}
			if i%4 == 0 {
				p.State = project.ProjectState_PROJECT_STATE_ARCHIVED
			}
			must[*connect.Response[project.CreateProjectResponse]](t)(h.project.CreateProject(ctx, connect.NewRequest(&project.CreateProjectRequest{Project: p})))
		}
		must[*connect.Response[project.CreateProjectResponse]](t)(h.project.CreateProject(ctx,
			connect.NewRequest(&project.CreateProjectRequest{Project: &project.Project{Id: "theirs", Org: "acme"}})))

		// What Project.listall sends: limit 100, state filter, created_at asc.
		sdk := func(state int) *project.ListProjectsRequest {
			return &project.ListProjectsRequest{Limit: 5, Filters: fmt.Sprintf("eq(state, %d)", state),
				SortBy: &common.Sort{Key: "created_at", Direction: common.Sort_ASCENDING}}
		}
		active := listProjects(t, h, sdk(0))
		if fmt.Sprint(active) != "[flytesnacks p01 p02 p03 p05 p06 p07 p09 p10 p11]" {
			t.Errorf("active projects = %v", active)
		}
		if archived := listProjects(t, h, sdk(1)); fmt.Sprint(archived) != "[p00 p04 p08]" {
			t.Errorf("archived projects = %v", archived)
		}
		if all := listProjects(t, h, &project.ListProjectsRequest{Limit: 2}); len(all) != 13 {
			t.Errorf("all projects = %v", all)
		}
		if acme := listProjects(t, h, &project.ListProjectsRequest{Org: "acme"}); fmt.Sprint(acme) != "[theirs]" {
			t.Errorf("acme projects = %v", acme)
		}
		resp := must[*connect.Response[project.ListProjectsResponse]](t)(h.project.ListProjects(ctx,
			connect.NewRequest(&project.ListProjectsRequest{Limit: 1})))
		if ps := resp.Msg.GetProjects().GetProjects(); len(ps) != 1 || len(ps[0].GetDomains()) != 3 {
			t.Errorf("listed project = %v", ps)
		}

		_, err := h.project.ListProjects(ctx, connect.NewRequest(&project.ListProjectsRequest{Filters: "eq(owner, p01)"}))
		wantCode(t, err, connect.CodeInvalidArgument, "eq(owner, p01)", `unknown field "owner"`)
	})
}

func TestSeedProjects(t *testing.T) {
	cfg := config.Projects{AutoCreate: false, Seed: []string{"alpha", "flytesnacks", "beta"}}
	eachDatabase(t, cfg, func(t *testing.T, h *harness) {
		ctx := context.Background()
		for range 2 { // seeding again changes nothing
			if err := h.projects.Seed(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if got := listProjects(t, h, &project.ListProjectsRequest{}); fmt.Sprint(got) != "[alpha beta flytesnacks]" {
			t.Fatalf("projects after seeding = %v", got)
		}
		if p := must[*project.Project](t)(getProject(ctx, h, "", "alpha")); p.GetState() != project.ProjectState_PROJECT_STATE_ACTIVE {
			t.Errorf("seeded project = %v", p)
		}
		// Without autoCreate, seeded projects are the ones tasks can go to.
		id := taskID("env.main", "v1")
		id.Project = "beta"
		if err := deploy(ctx, h, id, taskSpec(id, "img")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("bad seed", func(t *testing.T) {
		h := newHarness(t, "sqlite://"+t.TempDir()+"/m.db", config.Projects{Seed: []string{"ok", "not ok"}})
		err := h.projects.Seed(context.Background())
		if err == nil || !strings.Contains(err.Error(), `projects.seed "not ok"`) {
			t.Fatalf("Seed = %v", err)
		}
	})
}
