package server

import (
	"context"
	"slices"
	"testing"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/project"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/authn"
)

const (
	procListProjects = "/flyteidl2.project.ProjectService/ListProjects"
	procWatchRuns    = "/flyteidl2.workflow.RunService/WatchRuns"
)

// A list that names no project answers a caller with a role on one
// project, and only with that project's items: unary answers and every
// message of a watch stream. A task's credential does not list at all.
func TestListsFilteredToTheCallersProjects(t *testing.T) {
	run := func(p string) *workflow.Run {
		return &workflow.Run{Action: &workflow.Action{Id: &common.ActionIdentifier{Run: &common.RunIdentifier{Project: p, Domain: "d", Name: "r"}, Name: "a0"}}}
	}
	ts := startServer(t, nil, func(s *Server) {
		list := func(context.Context, *connect.Request[project.ListProjectsRequest]) (*connect.Response[project.ListProjectsResponse], error) {
			return connect.NewResponse(&project.ListProjectsResponse{Projects: &project.Projects{Projects: []*project.Project{{Id: "p1"}, {Id: "p2"}, {Id: "p3"}}}}), nil
		}
		watch := func(_ context.Context, _ *connect.Request[workflow.WatchRunsRequest], st *connect.ServerStream[workflow.WatchRunsResponse]) error {
			for _, m := range []*workflow.WatchRunsResponse{{Runs: []*workflow.Run{run("p1"), run("p2")}}, {Runs: []*workflow.Run{run("p2")}}, {Runs: []*workflow.Run{run("p1")}}} {
				if err := st.Send(m); err != nil {
					return err
				}
			}
			return nil
		}
		_ = s.Mount(Service{Path: "/flyteidl2.project.ProjectService/", Handler: connect.NewUnaryHandler(procListProjects, list, s.HandlerOptions()...)})
		_ = s.Mount(Service{Path: "/flyteidl2.workflow.RunService/", Handler: connect.NewServerStreamHandler(procWatchRuns, watch, s.HandlerOptions()...)})
		s.RequireAuth(Auth{Verifier: fakeVerifier{
			"p1":   {Subject: "apikey:1", Kind: authn.KindAPIKey, Bindings: []authn.Binding{{Role: "viewer", Project: "p1", Domain: "*"}}},
			"all":  {Subject: "apikey:2", Kind: authn.KindAPIKey, Bindings: []authn.Binding{{Role: "viewer", Project: "*", Domain: "*"}}},
			"task": {Subject: "task:p1/d/r", Kind: authn.KindTask, Run: authn.RunScope{Project: "p1", Domain: "d", Run: "r"}},
		}})
	})
	projects := func(token string) ([]string, error) {
		c := connect.NewClient[project.ListProjectsRequest, project.ListProjectsResponse](httpClient(false), ts.base+procListProjects)
		req := connect.NewRequest(&project.ListProjectsRequest{})
		req.Header().Set("Authorization", "Bearer "+token)
		resp, err := c.CallUnary(context.Background(), req)
		if err != nil {
			return nil, err
		}
		var ids []string
		for _, p := range resp.Msg.GetProjects().GetProjects() {
			ids = append(ids, p.GetId())
		}
		return ids, nil
	}
	if got, err := projects("p1"); err != nil || !slices.Equal(got, []string{"p1"}) {
		t.Errorf("viewer of p1 lists %v, %v; want [p1]", got, err)
	}
	if got, err := projects("all"); err != nil || len(got) != 3 {
		t.Errorf("viewer of every project lists %v, %v; want all three", got, err)
	}
	if _, err := projects("task"); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("a task lists projects: %v", err)
	}

	c := connect.NewClient[workflow.WatchRunsRequest, workflow.WatchRunsResponse](httpClient(false), ts.base+procWatchRuns)
	req := connect.NewRequest(&workflow.WatchRunsRequest{})
	req.Header().Set("Authorization", "Bearer p1")
	st, err := c.CallServerStream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var seen []string
	for st.Receive() {
		var ps []string
		for _, r := range st.Msg().GetRuns() {
			ps = append(ps, r.GetAction().GetId().GetRun().GetProject())
		}
		seen = append(seen, slices.Concat([]string{"["}, ps, []string{"]"})...)
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"[", "p1", "]", "[", "]", "[", "p1", "]"}; !slices.Equal(seen, want) {
		t.Errorf("watch as viewer of p1 got %v, want %v", seen, want)
	}
}
