package apikey

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/oidcauth"
	"fmgr.dev/internal/oidctest"
)

// The SDK's ClientSecret flow against the manager's one token endpoint
// with an identity provider configured: an API key's id and secret (HTTP
// Basic, the secret form-urlencoded as the SDK sends it) get a manager
// token and never reach the provider; the provider's own confidential
// client gets the provider's token through the same endpoint, and that
// token is bound by auth.bindings' client (the client_id claim) or subject
// (its sub); a wrong secret is invalid_client either way.
func TestClientSecretForKeysAndProviderClients(t *testing.T) {
	idp := oidctest.New(t)
	idp.AddClient(oidctest.Client{ID: "ci-robot", Secret: "s3cret/+=", Subject: "svc-7f3a"})
	idp.AddClient(oidctest.Client{ID: "unbound-robot", Secret: "x"})
	cfg := config.Auth{Mode: config.AuthRequired,
		OIDC: config.OIDC{Issuer: idp.URL, Audiences: []string{idp.Audience}, ClientID: idp.ClientID, SubjectClaim: "sub", GroupsClaim: "groups"},
		Bindings: []config.AuthBinding{
			{Client: "ci-robot", Role: RoleContributor, Project: "p", Domain: "development"},
			{Subject: "svc-7f3a", Role: RoleViewer, Project: "q", Domain: "*"},
		}}
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) {
		ctx := context.Background()
		iss := NewIssuer(NewStore(g), DeriveSigningKey("k"), time.Hour)
		k, secret, err := iss.store.Create(ctx, "ci", RoleAdmin, Any, Any)
		if err != nil {
			t.Fatal(err)
		}
		provider := oidcauth.New(cfg, nil)
		chain := authn.Verifiers{provider, iss}
		srv := httptest.NewServer(oidcauth.TokenEndpoint(iss.TokenHandler(nil), IsKeyID, provider.Discovery(), nil, slog.New(slog.DiscardHandler)))
		defer srv.Close()

		before := idp.GrantsServed("client_credentials")
		tok, status := clientSecret(t, srv.URL, k.KeyID, secret)
		if status != http.StatusOK || !strings.HasPrefix(tok, tokenPrefix) {
			t.Fatalf("API key through ClientSecret: %d %q", status, tok)
		}
		if p, err := chain.Verify(ctx, tok); err != nil || p.Subject != "apikey:"+k.KeyID {
			t.Fatalf("API key token: %+v, %v", p, err)
		}
		if _, status := clientSecret(t, srv.URL, k.KeyID, "wrong"); status != http.StatusUnauthorized {
			t.Errorf("API key with a wrong secret: %d, want 401", status)
		}
		if n := idp.GrantsServed("client_credentials"); n != before {
			t.Fatalf("an API key's request reached the provider (%d grants)", n-before)
		}

		tok, status = clientSecret(t, srv.URL, "ci-robot", "s3cret/+=")
		if status != http.StatusOK || idp.GrantsServed("client_credentials") != before+1 {
			t.Fatalf("provider client through ClientSecret: %d %q", status, tok)
		}
		p, err := chain.Verify(ctx, tok)
		if err != nil || p.Subject != "user:svc-7f3a" || p.Kind != authn.KindUser {
			t.Fatalf("provider client's token: %+v, %v", p, err)
		}
		want := []authn.Binding{{Role: RoleContributor, Project: "p", Domain: "development"}, {Role: RoleViewer, Project: "q", Domain: "*"}}
		if len(p.Bindings) != 2 || p.Bindings[0] != want[0] || p.Bindings[1] != want[1] {
			t.Errorf("provider client's bindings %+v, want %+v", p.Bindings, want)
		}
		if _, status := clientSecret(t, srv.URL, "ci-robot", "wrong"); status != http.StatusUnauthorized {
			t.Errorf("provider client with a wrong secret: %d, want 401", status)
		}

		tok, _ = clientSecret(t, srv.URL, "unbound-robot", "x")
		if p, err := chain.Verify(ctx, tok); err != nil || len(p.Bindings) != 0 {
			t.Errorf("an unbound client: %+v, %v; want authenticated with no role", p, err)
		}
	})
}

// clientSecret is the SDK's ClientSecret request (flyte/remote/_client/
// auth/_token_client.py): the id as is and the secret quote_plus'd in
// HTTP Basic, grant_type client_credentials and the server's scopes.
func clientSecret(t *testing.T, endpoint, id, secret string) (token string, status int) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(url.Values{
		"grant_type": {"client_credentials"}, "scope": {"openid profile"}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(id, url.QueryEscape(secret))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		AccessToken string `json:"access_token"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return out.AccessToken, resp.StatusCode
}
