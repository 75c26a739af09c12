package consoleauth

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/oidcauth"
	"fmgr.dev/internal/requrl"
)

// fakeUsers answers discovery from a provider the test serves.
type fakeUsers struct{ disc *oidcauth.Discovery }

func (f fakeUsers) VerifyIDToken(context.Context, string, string, string) (oidcauth.Identity, error) {
	return oidcauth.Identity{}, authn.ErrBadCredential
}
func (f fakeUsers) Principal(oidcauth.Identity) authn.Principal { return authn.Principal{} }
func (f fakeUsers) BoundGroups([]string) []string               { return nil }
func (f fakeUsers) Discovery() *oidcauth.Discovery              { return f.disc }

// A confidential client (auth.console.clientSecret) authenticates the code
// exchange with HTTP Basic, both parts form-encoded (RFC 6749 §2.3.1), and
// sends the PKCE verifier and the redirect URI; a public client sends no
// secret.
func TestCodeExchange(t *testing.T) {
	var got *http.Request
	var form url.Values
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": srv.URL, "token_endpoint": srv.URL + "/token",
			"authorization_endpoint": srv.URL + "/authorize", "jwks_uri": srv.URL + "/jwks"})
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		got, form = r, r.PostForm
		_ = json.NewEncoder(w).Encode(map[string]string{"id_token": "eyJ.x.y"})
	})
	for _, secret := range []string{"s3cr:et&", ""} {
		s, err := New(Config{SigningKey: []byte("k"), TTL: time.Hour, Keys: &fakeKeys{},
			Users: fakeUsers{oidcauth.NewDiscovery(srv.URL, nil)}, ClientID: "console app", ClientSecret: secret})
		if err != nil {
			t.Fatal(err)
		}
		ctx := requrl.WithBaseURL(context.Background(), "https://mgr.example.com")
		raw, err := s.exchange(ctx, "the-code", "the-verifier")
		if err != nil || raw != "eyJ.x.y" {
			t.Fatalf("exchange: %q %v", raw, err)
		}
		id, pw, basic := got.BasicAuth()
		if secret != "" && (!basic || id != "console+app" || pw != "s3cr%3Aet%26") {
			t.Errorf("confidential client: Basic %v %q %q", basic, id, pw)
		}
		if secret == "" && basic {
			t.Error("a public client sent a secret")
		}
		if form.Get("grant_type") != "authorization_code" || form.Get("code") != "the-code" || form.Get("code_verifier") != "the-verifier" ||
			form.Get("redirect_uri") != "https://mgr.example.com"+CallbackPath || form.Get("client_id") != "console app" {
			t.Errorf("token request form %v", form)
		}
	}
}
