package consoleauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/oidcauth"
	"fmgr.dev/internal/oidctest"
	"fmgr.dev/internal/requrl"
)

// A person signs in at the provider: the manager redirects with PKCE, a
// state and a nonce, the provider redirects back with a code, and the
// session that starts names the person with the roles their group's
// binding gives (of a person in more groups than a cookie holds, the
// session keeps the bound ones). A callback whose state is not the flow's,
// or without the flow's cookie, starts nothing.
func TestSignInThroughTheProvider(t *testing.T) {
	iss := oidctest.New(t)
	// More groups than a cookie holds: the session keeps the bound one.
	groups := []string{}
	for i := range 400 {
		groups = append(groups, fmt.Sprintf("group-%03d", i))
	}
	iss.SetUser(oidctest.User{Subject: "bob", Email: "bob@example.com", Groups: append(groups, "ml")})
	users := oidcauth.New(config.Auth{
		OIDC:     config.OIDC{Issuer: iss.URL, Audiences: []string{iss.Audience}, ClientID: iss.ClientID, SubjectClaim: "sub", GroupsClaim: "groups"},
		Bindings: []config.AuthBinding{{Group: "ml", Role: "viewer", Project: "flytesnacks"}},
	}, nil)
	s, err := New(Config{SigningKey: []byte("k"), TTL: time.Hour, Keys: &fakeKeys{}, Users: users,
		ClientID: iss.ClientID, Scopes: []string{"openid", "email"}, ProviderName: "Test IdP"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(requrl.Middleware("", s.Handler()))
	defer srv.Close()
	jar, _ := cookiejar.New(nil)
	var landed string
	client := &http.Client{Jar: jar, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(r.URL.Path, "/v2/") {
			landed = r.URL.RequestURI()
			return http.ErrUseLastResponse
		}
		return nil
	}}

	// Not signed in: the session route says how to sign in.
	resp, err := client.Get(srv.URL + Prefix + "session")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("session before sign-in: %d", resp.StatusCode)
	}

	resp, err = client.Get(srv.URL + Prefix + "login?next=" + url.QueryEscape("/v2/domain/development/project/flytesnacks/runs"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || landed != "/v2/domain/development/project/flytesnacks/runs" {
		t.Fatalf("sign-in ended with %d at %q", resp.StatusCode, landed)
	}
	if n := iss.GrantsServed("authorization_code"); n != 1 {
		t.Errorf("the provider served %d code exchanges", n)
	}
	u, _ := url.Parse(srv.URL)
	var cookie string
	for _, c := range jar.Cookies(u) {
		if c.Name == CookieName {
			cookie = c.Value
		}
	}
	if cookie == "" || len(cookie) > maxCookie {
		t.Fatalf("session cookie of %d bytes, want one of at most %d", len(cookie), maxCookie)
	}
	ctx := requrl.WithBaseURL(context.Background(), srv.URL)
	h := consoleHeaders(cookie)
	h.Set("Origin", srv.URL)
	p, err := s.VerifySession(ctx, h)
	if err != nil || p.Subject != "user:bob" || p.Kind != authn.KindUser || len(p.Bindings) != 1 ||
		p.Bindings[0] != (authn.Binding{Role: "viewer", Project: "flytesnacks", Domain: "*"}) {
		t.Fatalf("VerifySession: %+v %v", p, err)
	}

	// A callback that is not the flow's.
	for name, path := range map[string]string{
		"wrong state": Prefix + "login",
		"no flow":     CallbackPath + "?code=x&state=y",
	} {
		c := &http.Client{CheckRedirect: func(r *http.Request, _ []*http.Request) error {
			if r.URL.Path == CallbackPath {
				q := r.URL.Query()
				q.Set("state", "forged")
				r.URL.RawQuery = q.Encode()
			}
			return nil
		}}
		c.Jar, _ = cookiejar.New(nil)
		resp, err := c.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", name, resp.StatusCode)
		}
		for _, ck := range c.Jar.Cookies(u) {
			if ck.Name == CookieName {
				t.Errorf("%s started a session", name)
			}
		}
	}
}

// An ID token counts only for the console's client and this sign-in's nonce.
func TestIDTokenNonceAndAudience(t *testing.T) {
	iss := oidctest.New(t)
	v := oidcauth.New(config.Auth{OIDC: config.OIDC{Issuer: iss.URL, Audiences: []string{iss.Audience}, ClientID: iss.ClientID, SubjectClaim: "sub", GroupsClaim: "groups"}}, nil)
	ctx := context.Background()
	tok := func(aud, nonce string) string {
		c := iss.Claims("alice")
		c["aud"], c["nonce"] = aud, nonce
		return iss.Sign(c)
	}
	if id, err := v.VerifyIDToken(ctx, tok(iss.ClientID, "n1"), iss.ClientID, "n1"); err != nil || id.Subject != "alice" {
		t.Fatalf("a good ID token: %+v %v", id, err)
	}
	for name, raw := range map[string]string{
		"other nonce":    tok(iss.ClientID, "n2"),
		"no nonce":       tok(iss.ClientID, ""),
		"other audience": tok("someone-else", "n1"),
		"foreign key":    oidctest.SignWith(oidctest.NewKey("key-1"), iss.Claims("alice")),
	} {
		if _, err := v.VerifyIDToken(ctx, raw, iss.ClientID, "n1"); !errors.Is(err, authn.ErrBadCredential) {
			t.Errorf("%s: %v, want ErrBadCredential", name, err)
		}
	}
}
