package compose

import (
	"context"
	"net/http"
	"testing"

	"connectrpc.com/connect"

	"fmgr.dev/apikey"
	"fmgr.dev/gen/go/flyteidl2/actions"
	"fmgr.dev/gen/go/flyteidl2/actions/actionsconnect"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
)

// A contributor key may enqueue actions into runs of its project and
// domain (the SDK's hybrid mode enqueues into an existing run from a
// client), and into no other domain's: not by naming the run there, nor by
// naming its own domain elsewhere in the request (run_spec.related_to,
// which the request's scope used to be read from, since it is nearer the
// top than the action's run). Nothing is written for a refused request.
func TestContributorEnqueuesOnlyInItsDomain(t *testing.T) {
	srv, gdb, _ := composed(t, map[string]any{"auth.mode": "required"})
	ctx, cancel := context.WithCancel(context.Background())
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-served })
	k, secret, err := apikey.NewStore(gdb).Create(ctx, "hybrid", apikey.RoleContributor, "flytesnacks", "development")
	if err != nil {
		t.Fatal(err)
	}
	client := actionsconnect.NewActionsServiceClient(http.DefaultClient, "http://"+srv.Addr().String())
	enqueue := func(domain string, relatedTo *common.RunIdentifier) error {
		req := connect.NewRequest(&actions.EnqueueRequest{
			Action: &actions.Action{
				ActionId: &common.ActionIdentifier{Name: "child", Run: &common.RunIdentifier{Project: "flytesnacks", Domain: domain, Name: "r1"}},
				Spec:     &actions.Action_Task{Task: &workflow.TaskAction{Id: &task.TaskIdentifier{Project: "flytesnacks", Domain: domain, Name: "t"}}},
			},
			RunSpec: &task.RunSpec{RelatedTo: relatedTo},
		})
		req.Header().Set("Authorization", "Bearer "+k.KeyID+":"+secret)
		_, err := client.Enqueue(ctx, req)
		return err
	}
	var before int64
	gdb.Table("actions").Count(&before)
	if err := enqueue("development", nil); connect.CodeOf(err) == connect.CodePermissionDenied || connect.CodeOf(err) == connect.CodeUnauthenticated {
		t.Errorf("enqueue into a run of the key's own domain: %v, want it past authorization", err)
	}
	if err := enqueue("production", nil); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("enqueue into another domain's run: %v, want PERMISSION_DENIED", err)
	}
	own := &common.RunIdentifier{Project: "flytesnacks", Domain: "development", Name: "r0"}
	if err := enqueue("production", own); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("enqueue into another domain's run, naming the key's own in run_spec.related_to: %v, want PERMISSION_DENIED", err)
	}
	var after int64
	gdb.Table("actions").Count(&after)
	if after != before {
		t.Errorf("refused enqueues wrote %d actions", after-before)
	}
}
