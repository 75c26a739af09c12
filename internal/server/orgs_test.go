package server

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/errs"
)

func TestOrgsInbound(t *testing.T) {
	single := &orgInterceptor{cfg: config.Orgs{Default: "local"}}
	separate := &orgInterceptor{cfg: config.Orgs{Default: "local", Separate: true}}
	create := func(runOrg, taskOrg string) *workflow.CreateRunRequest {
		return &workflow.CreateRunRequest{
			Id:   &workflow.CreateRunRequest_RunId{RunId: &common.RunIdentifier{Org: runOrg, Project: "p", Domain: "d", Name: "r"}},
			Task: &workflow.CreateRunRequest_TaskId{TaskId: &task.TaskIdentifier{Org: taskOrg, Project: "p", Domain: "d", Name: "t", Version: "v"}},
		}
	}
	for _, c := range []struct {
		name             string
		i                *orgInterceptor
		req              *workflow.CreateRunRequest
		client, run, tsk string
	}{
		{"single: every org is the one org", single, create("localhost", "acme"), "localhost", "", ""},
		{"single: none named", single, create("", ""), "", "", ""},
		{"separate: orgs stay", separate, create("acme", "acme"), "acme", "acme", "acme"},
		{"separate: the default names the empty org", separate, create("local", "acme"), "local", "", "acme"},
	} {
		client, err := c.i.inbound(c.req)
		if err != nil || client != c.client || c.req.GetRunId().GetOrg() != c.run || c.req.GetTaskId().GetOrg() != c.tsk {
			t.Errorf("%s: client %q (%v), run org %q, task org %q", c.name, client, err, c.req.GetRunId().GetOrg(), c.req.GetTaskId().GetOrg())
		}
	}

	// A oneof left unset stays unset; an org that is no identifier segment
	// is refused, naming its field.
	list := &workflow.ListRunsRequest{ScopeBy: &workflow.ListRunsRequest_ProjectId{ProjectId: &common.ProjectIdentifier{Name: "p", Domain: "d"}}}
	if _, err := single.inbound(list); err != nil || list.GetProjectId() == nil {
		t.Fatalf("scope = %v, %v", list.GetScopeBy(), err)
	}
	_, err := single.inbound(&workflow.ListRunsRequest{ScopeBy: &workflow.ListRunsRequest_Org{Org: "a/../b"}})
	if !errors.Is(err, errs.ErrInvalid) || !strings.HasPrefix(err.Error(), `org "a/../b"`) {
		t.Fatalf("bad org: %v", err)
	}
}

func TestOrgsOutbound(t *testing.T) {
	// A spec shared with a cache: the answer built on it must not change it.
	shared := &task.TaskSpec{TaskTemplate: &core.TaskTemplate{Id: &core.Identifier{Project: "p", Name: "t"}}}
	resp := &workflow.GetActionDetailsResponse{Details: &workflow.ActionDetails{
		Id:       &common.ActionIdentifier{Run: &common.RunIdentifier{Project: "p", Domain: "d", Name: "r"}, Name: "a0"},
		Metadata: &workflow.ActionMetadata{Spec: &workflow.ActionMetadata_Task{Task: &workflow.TaskActionMetadata{Id: &task.TaskIdentifier{}}}},
		Spec:     &workflow.ActionDetails_Task{Task: shared},
	}}
	before := proto.Clone(resp)
	out := stamped(resp, "localhost").(*workflow.GetActionDetailsResponse)
	if !proto.Equal(resp, before) {
		t.Fatalf("the response was changed in place: %v", resp)
	}
	if org := out.GetDetails().GetId().GetRun().GetOrg(); org != "localhost" {
		t.Errorf("run org %q, want localhost", org)
	}
	// An empty identifier is absent, not one to name; a task template is
	// the client's document, passed through.
	if org := out.GetDetails().GetMetadata().GetTask().GetId().GetOrg(); org != "" {
		t.Errorf("empty task id given org %q", org)
	}
	if org := out.GetDetails().GetTask().GetTaskTemplate().GetId().GetOrg(); org != "" {
		t.Errorf("template id given org %q", org)
	}

	// A unary answer is stamped in place, its parts replaced by copies.
	runs := &workflow.ListRunsResponse{Runs: []*workflow.Run{{Action: &workflow.Action{Id: resp.GetDetails().GetId()}}}}
	stampInPlace(runs, "local")
	if runs.GetRuns()[0].GetAction().GetId().GetRun().GetOrg() != "local" || resp.GetDetails().GetId().GetRun().GetOrg() != "" {
		t.Fatalf("stamped %v; shared id %v", runs, resp.GetDetails().GetId())
	}
	// An identifier that names an org keeps it.
	named := &workflow.ListRunsResponse{Runs: []*workflow.Run{{Action: &workflow.Action{Id: &common.ActionIdentifier{
		Run: &common.RunIdentifier{Org: "acme", Project: "p", Domain: "d", Name: "r"}, Name: "a0"}}}}}
	if got := stamped(named, "local"); got != proto.Message(named) {
		t.Fatalf("a response with every org named was copied: %v", got)
	}
}
