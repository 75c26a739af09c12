package authz

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/project"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/authn"
)

const (
	createRun = "/flyteidl2.workflow.RunService/CreateRun"
	listRuns  = "/flyteidl2.workflow.RunService/ListRuns"
	getRun    = "/flyteidl2.workflow.RunService/GetRunDetails"
	listProj  = "/flyteidl2.project.ProjectService/ListProjects"
	createPrj = "/flyteidl2.project.ProjectService/CreateProject"
)

func TestScope(t *testing.T) {
	run := &common.RunIdentifier{Org: "o", Project: "p", Domain: "d", Name: "r"}
	for name, tc := range map[string]struct {
		msg       proto.Message
		proj, dom string
		ok        bool
	}{
		"run id":        {&workflow.CreateRunRequest{Id: &workflow.CreateRunRequest_RunId{RunId: run}}, "p", "d", true},
		"project id":    {&workflow.CreateRunRequest{Id: &workflow.CreateRunRequest_ProjectId{ProjectId: &common.ProjectIdentifier{Name: "p", Domain: "d"}}}, "p", "d", true},
		"action nested": {&workflow.GetActionDetailsRequest{ActionId: &common.ActionIdentifier{Run: run, Name: "a0"}}, "p", "d", true},
		"none":          {&project.ListProjectsRequest{}, "", "", false},
		"nil":           {nil, "", "", false},
	} {
		p, d, ok := Scope(tc.msg)
		if p != tc.proj || d != tc.dom || ok != tc.ok {
			t.Errorf("%s: Scope = %q %q %v, want %q %q %v", name, p, d, ok, tc.proj, tc.dom, tc.ok)
		}
	}
}

func TestAllowed(t *testing.T) {
	viewer := []authn.Binding{{Role: "viewer", Project: "p", Domain: "*"}}
	contrib := []authn.Binding{{Role: "contributor", Project: "p", Domain: "development"}}
	admin := []authn.Binding{{Role: "admin", Project: "*", Domain: "*"}}
	for _, tc := range []struct {
		name      string
		b         []authn.Binding
		proc      string
		proj, dom string
		want      bool
	}{
		{"viewer reads its project", viewer, getRun, "p", "production", true},
		{"viewer cannot run", viewer, createRun, "p", "development", false},
		{"viewer of another project", viewer, getRun, "q", "development", false},
		{"contributor runs in its domain", contrib, createRun, "p", "development", true},
		{"contributor not in another domain", contrib, createRun, "p", "production", false},
		{"contributor cannot administer", contrib, createPrj, "", "", false},
		{"an org-wide list is filtered, not refused", viewer, listRuns, "", "", true},
		{"an org-wide read needs every project", viewer, "/flyteidl2.workflow.RunService/WatchClusterEvents", "", "", false},
		{"project names are listed to any viewer", viewer, listProj, "", "", true},
		{"admin everything", admin, createPrj, "", "", true},
		{"no bindings", nil, listProj, "", "", false},
		{"unknown role", []authn.Binding{{Role: "owner", Project: "*", Domain: "*"}}, getRun, "p", "d", false},
	} {
		a := Procedures[tc.proc]
		if got := Allowed(tc.b, tc.proc, a, tc.proj, tc.dom); got != tc.want {
			t.Errorf("%s: Allowed = %v, want %v", tc.name, got, tc.want)
		}
	}
}
