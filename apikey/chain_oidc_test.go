package apikey

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/oidcauth"
	"fmgr.dev/internal/oidctest"
)

// With an identity provider, the server's verifier chain (as
// manager/compose builds it) takes the provider's JWTs and API keys and
// their tokens side by side, on both databases, and the token endpoint
// still exchanges API keys.
func TestKeysBesideAnIdentityProvider(t *testing.T) {
	idp := oidctest.New(t)
	cfg := config.Auth{Mode: config.AuthRequired,
		OIDC:     config.OIDC{Issuer: idp.URL, Audiences: []string{idp.Audience}, ClientID: idp.ClientID, SubjectClaim: "sub", GroupsClaim: "groups"},
		Bindings: []config.AuthBinding{{Subject: "alice", Role: RoleViewer, Project: "*", Domain: "*"}}}
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) {
		ctx := context.Background()
		iss := NewIssuer(NewStore(g), DeriveSigningKey("k"), time.Hour)
		k, secret, err := iss.store.Create(ctx, "ci", RoleAdmin, Any, Any)
		if err != nil {
			t.Fatal(err)
		}
		provider := oidcauth.New(cfg, nil)
		chain := authn.Verifiers{provider, iss}

		p, err := chain.Verify(ctx, idp.Token("alice"))
		if err != nil || p.Subject != "user:alice" || p.Kind != authn.KindUser {
			t.Fatalf("provider token: %+v, %v", p, err)
		}
		p, err = chain.Verify(ctx, k.KeyID+":"+secret)
		if err != nil || p.Subject != "apikey:"+k.KeyID {
			t.Fatalf("API key: %+v, %v", p, err)
		}

		srv := httptest.NewServer(oidcauth.TokenEndpoint(iss.TokenHandler(nil), IsKeyID, provider.Discovery(), nil, slog.New(slog.DiscardHandler)))
		defer srv.Close()
		resp, err := http.PostForm(srv.URL, url.Values{"grant_type": {"client_credentials"}, "client_id": {k.KeyID}, "client_secret": {secret}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("client_credentials at the token endpoint with a provider: %s", resp.Status)
		}
		token, _, err := iss.Exchange(ctx, k.KeyID, secret)
		if err != nil {
			t.Fatal(err)
		}
		if p, err := chain.Verify(ctx, token); err != nil || p.Subject != "apikey:"+k.KeyID {
			t.Fatalf("API key token: %+v, %v", p, err)
		}

		for _, bad := range []string{"", "garbage", k.KeyID + ":wrong", oidctest.SignWith(oidctest.NewKey("key-1"), idp.Claims("alice"))} {
			if _, err := chain.Verify(ctx, bad); !errors.Is(err, authn.ErrBadCredential) {
				t.Errorf("%q: %v, want ErrBadCredential", bad, err)
			}
		}
	})
}
