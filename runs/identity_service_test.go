package runs_test

import (
	"context"
	"testing"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/auth"
	"fmgr.dev/runs"
)

func TestIdentity(t *testing.T) {
	h := newHarness(t, "sqlite://"+t.TempDir()+"/m.db", autoCreate)
	ctx := context.Background()
	for range 2 { // stable across calls
		resp := must[*connect.Response[auth.UserInfoResponse]](t)(h.identity.UserInfo(ctx, connect.NewRequest(&auth.UserInfoRequest{})))
		if u := resp.Msg; u.GetSubject() != runs.AnonymousSubject || u.GetSubject() != "anonymous" || u.GetName() != "Anonymous" {
			t.Fatalf("user = %v", u)
		}
	}
	_, err := h.authMeta.GetOAuth2Metadata(ctx, connect.NewRequest(&auth.GetOAuth2MetadataRequest{}))
	wantCode(t, err, connect.CodeUnimplemented, "authentication is not configured")
	_, err = h.authMeta.GetPublicClientConfig(ctx, connect.NewRequest(&auth.GetPublicClientConfigRequest{}))
	wantCode(t, err, connect.CodeUnimplemented, "authentication is not configured")
}
