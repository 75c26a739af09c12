package authz

import (
	"testing"

	"fmgr.dev/gen/go/flyteidl2/actions"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/authn"
)

// Every run a request names must be allowed, not only the first project
// Scope meets.
func TestAllowedRequestChecksEveryRun(t *testing.T) {
	const proc = "/flyteidl2.actions.ActionsService/Enqueue"
	dev := []authn.Binding{{Role: "contributor", Project: "p", Domain: "development"}}
	run := func(domain string) *common.RunIdentifier {
		return &common.RunIdentifier{Project: "p", Domain: domain, Name: "r"}
	}
	req := func(domain string, related *common.RunIdentifier) *actions.EnqueueRequest {
		return &actions.EnqueueRequest{Action: &actions.Action{ActionId: &common.ActionIdentifier{Run: run(domain), Name: "a"}},
			RunSpec: &task.RunSpec{RelatedTo: related}}
	}
	for _, tc := range []struct {
		name string
		req  *actions.EnqueueRequest
		ok   bool
		deny string // the domain a denial names
	}{
		{"own domain", req("development", nil), true, ""},
		{"own domain, related to its own", req("development", run("development")), true, ""},
		{"other domain", req("production", nil), false, "production"},
		{"other domain, related to its own", req("production", run("development")), false, "production"},
		{"own domain, related to another", req("development", run("production")), false, "production"},
	} {
		_, domain, ok := AllowedRequest(dev, proc, Execute, tc.req)
		if ok != tc.ok || (!ok && domain != tc.deny) {
			t.Errorf("%s: allowed %v naming %q, want %v naming %q", tc.name, ok, domain, tc.ok, tc.deny)
		}
	}
}
