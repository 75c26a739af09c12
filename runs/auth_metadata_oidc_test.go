package runs_test

import (
	"context"
	"slices"
	"testing"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/auth"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/oidctest"
	"fmgr.dev/internal/requrl"
	"fmgr.dev/runs"
)

// With an identity provider, the SDK's Pkce and DeviceFlow are sent to the
// provider's authorization and device endpoints, while the token endpoint
// stays the manager's (API keys; other grants are forwarded), and the
// public client is the provider's.
func TestAuthMetadataWithProvider(t *testing.T) {
	iss := oidctest.New(t)
	cfg := config.Default().Auth
	cfg.Mode = config.AuthRequired
	cfg.OIDC.Issuer, cfg.OIDC.ClientID, cfg.OIDC.Audience = iss.URL, iss.ClientID, "flyte-api"
	cfg.OIDC.Audiences = []string{iss.Audience}
	svc := runs.NewAuthMetadataService(cfg)
	ctx := requrl.WithBaseURL(context.Background(), "https://flyte.example.com")
	md, err := svc.GetOAuth2Metadata(ctx, connect.NewRequest(&auth.GetOAuth2MetadataRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	m := md.Msg
	if m.GetAuthorizationEndpoint() != iss.URL+"/authorize" || m.GetDeviceAuthorizationEndpoint() != iss.URL+"/device/code" ||
		m.GetTokenEndpoint() != "https://flyte.example.com/oauth2/token" || m.GetIssuer() != iss.URL {
		t.Errorf("metadata = %v", m)
	}
	pc, err := svc.GetPublicClientConfig(ctx, connect.NewRequest(&auth.GetPublicClientConfigRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if p := pc.Msg; p.GetClientId() != iss.ClientID || p.GetAudience() != "flyte-api" ||
		!slices.Contains(p.GetScopes(), "offline_access") || p.GetRedirectUri() != cfg.RedirectURI {
		t.Errorf("public client config = %v", p)
	}

	// A provider that cannot be reached: UNAVAILABLE (the SDK retries),
	// with no internal detail.
	cfg.OIDC.Issuer = "http://127.0.0.1:1"
	_, err = runs.NewAuthMetadataService(cfg).GetOAuth2Metadata(ctx, connect.NewRequest(&auth.GetOAuth2MetadataRequest{}))
	if connect.CodeOf(err) != connect.CodeUnavailable {
		t.Errorf("provider down: %v", err)
	}
}
