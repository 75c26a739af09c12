package runs_test

import (
	"context"
	"testing"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/auth"
	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/requrl"
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

// With auth required, AuthMetadataService advertises the manager's token
// endpoint at the caller's base URL and the configured client settings,
// and UserInfo answers the authenticated principal.
func TestAuthMetadataFromConfig(t *testing.T) {
	cfg := config.Default().Auth
	cfg.Mode = config.AuthRequired
	cfg.AuthorizationMetadataKey = "flyte-authorization"
	svc := runs.NewAuthMetadataService(cfg)
	ctx := requrl.WithBaseURL(context.Background(), "https://flyte.example.com")
	md, err := svc.GetOAuth2Metadata(ctx, connect.NewRequest(&auth.GetOAuth2MetadataRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if got := md.Msg.GetTokenEndpoint(); got != "https://flyte.example.com/oauth2/token" {
		t.Errorf("token_endpoint = %q", got)
	}
	pc, err := svc.GetPublicClientConfig(ctx, connect.NewRequest(&auth.GetPublicClientConfigRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if pc.Msg.GetAuthorizationMetadataKey() != "flyte-authorization" || pc.Msg.GetClientId() != cfg.ClientID {
		t.Errorf("public client config = %v", pc.Msg)
	}
	who := authn.WithPrincipal(ctx, authn.Principal{Subject: "apikey:k1", Name: "ci", Kind: authn.KindAPIKey})
	u, err := runs.NewIdentityService().UserInfo(who, connect.NewRequest(&auth.UserInfoRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if u.Msg.GetSubject() != "apikey:k1" || u.Msg.GetName() != "ci" {
		t.Errorf("UserInfo = %v", u.Msg)
	}
}
