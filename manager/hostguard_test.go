package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/gen/go/flyteidl2/workflow/workflowconnect"
	"fmgr.dev/internal/testkit"
)

// withHost sends every request with a fixed Host (:authority), as a
// browser on a name rebound to 127.0.0.1 would.
type withHost struct{ host string }

func (h withHost) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Host = h.host
	return http.DefaultTransport.RoundTrip(r)
}

// A DNS-rebinding page reaches the port but names its own host: the manager
// must refuse its CreateRun before anything runs, and serve the very same
// request from a client that addresses it as localhost.
func TestCreateRunFromForeignHostIsRefused(t *testing.T) {
	home := isolate(t)
	// Made before the manager starts: it hides (from attempts of other
	// users) the directories on the way to its data that they cannot enter
	// when it starts.
	marker := filepath.Join(testkit.TaskDir(t), "pwned")
	m := launch(t, home)
	addr := m.addr(t)
	if status, body := waitReady(t, addr); status != http.StatusOK {
		t.Fatalf("/readyz = %d %q", status, body)
	}
	port := addr[strings.LastIndex(addr, ":")+1:]

	req := &workflow.CreateRunRequest{
		Id: &workflow.CreateRunRequest_RunId{RunId: &common.RunIdentifier{Project: "flytesnacks", Domain: "development", Name: "rebound"}},
		Task: &workflow.CreateRunRequest_TaskSpec{TaskSpec: &task.TaskSpec{TaskTemplate: &core.TaskTemplate{
			Id:       &core.Identifier{ResourceType: core.ResourceType_TASK, Project: "flytesnacks", Domain: "development", Name: "t.rebound", Version: "v1"},
			Type:     "python",
			Metadata: &core.TaskMetadata{},
			Target: &core.TaskTemplate_Container{Container: &core.Container{
				Image: "ignored",
				Args:  []string{"/bin/sh", "-c", "id > " + marker},
			}},
		}}},
	}
	client := func(host string) workflowconnect.RunServiceClient {
		return workflowconnect.NewRunServiceClient(&http.Client{Transport: withHost{host}, Timeout: time.Minute}, "http://"+addr)
	}
	listRuns := func() int {
		t.Helper()
		resp, err := client(addr).ListRuns(context.Background(), connect.NewRequest(&workflow.ListRunsRequest{
			Request: &common.ListRequest{Limit: 100},
			ScopeBy: &workflow.ListRunsRequest_ProjectId{ProjectId: &common.ProjectIdentifier{Name: "flytesnacks", Domain: "development"}},
		}))
		if err != nil {
			t.Fatalf("ListRuns: %v", err)
		}
		return len(resp.Msg.GetRuns())
	}

	for _, host := range []string{"evil.example:" + port, "evil.example", "rebind.attacker.test:" + port} {
		_, err := client(host).CreateRun(context.Background(), connect.NewRequest(req))
		if connect.CodeOf(err) != connect.CodePermissionDenied {
			t.Fatalf("CreateRun with Host %s: err = %v, want permission_denied (HTTP 403)", host, err)
		}
	}
	if n := listRuns(); n != 0 {
		t.Fatalf("%d runs exist after refused CreateRuns", n)
	}

	// The same request from the SDK's usual endpoint is served and runs.
	if _, err := client("localhost:"+port).CreateRun(context.Background(), connect.NewRequest(req)); err != nil {
		t.Fatalf("CreateRun via localhost: %v", err)
	}
	if testkit.Poll(60*time.Second, 50*time.Millisecond, func() string {
		if data, err := os.ReadFile(marker); err != nil || len(data) == 0 {
			return "no marker yet"
		}
		return ""
	}) != "" {
		t.Fatalf("the accepted run did not execute its command; stderr:\n%s", m.stderr)
	}
	if n := listRuns(); n != 1 {
		t.Errorf("%d runs, want 1", n)
	}
}
