package consoleauth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/requrl"
)

// fakeKeys knows one key, "fmkgood:secret", until it is revoked.
type fakeKeys struct {
	mu      sync.Mutex
	revoked bool
}

func (k *fakeKeys) SignIn(_ context.Context, pasted string) (string, authn.Principal, error) {
	if pasted != "fmkgood:secret" {
		return "", authn.Principal{}, authn.ErrBadCredential
	}
	p, err := k.KeyPrincipal(context.Background(), "fmkgood")
	return "fmkgood", p, err
}

func (k *fakeKeys) KeyPrincipal(_ context.Context, id string) (authn.Principal, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if id != "fmkgood" || k.revoked {
		return authn.Principal{}, authn.ErrBadCredential
	}
	return authn.Principal{Subject: "apikey:fmkgood", Name: "ci", Kind: authn.KindAPIKey,
		Bindings: []authn.Binding{{Role: "viewer", Project: "p", Domain: "d"}}}, nil
}

const base = "https://mgr.example.com"

func newSessions(t *testing.T, keys Keys) *Sessions {
	t.Helper()
	s, err := New(Config{SigningKey: []byte("signing key"), TTL: time.Hour, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// consoleHeaders are what the console's fetch sends.
func consoleHeaders(cookie string) http.Header {
	h := http.Header{}
	h.Set(Header, "1")
	h.Set("Content-Type", "application/json")
	h.Set("Origin", base)
	h.Set("Sec-Fetch-Site", "same-origin")
	if cookie != "" {
		h.Set("Cookie", CookieName+"="+cookie)
	}
	return h
}

// signIn posts a key to the handler and answers the session cookie.
func signIn(t *testing.T, s *Sessions, key string, h http.Header) (*http.Response, *http.Cookie) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, base+Prefix+"apikey", strings.NewReader(`{"key": "`+key+`"}`))
	req.Header = h
	req = req.WithContext(requrl.WithBaseURL(req.Context(), base))
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	resp := rec.Result()
	for _, c := range resp.Cookies() {
		if c.Name == CookieName && c.Value != "" {
			return resp, c
		}
	}
	return resp, nil
}

func TestSessionFromAPIKey(t *testing.T) {
	keys := &fakeKeys{}
	s := newSessions(t, keys)
	now := time.Now()
	s.now = func() time.Time { return now }
	ctx := requrl.WithBaseURL(context.Background(), base)

	if resp, c := signIn(t, s, "fmkgood:wrong", consoleHeaders("")); c != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong key signed in: %d %v", resp.StatusCode, c)
	}
	// A cross-site form cannot sign anyone in (login CSRF).
	form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Origin": {"https://evil.example"}}
	if resp, c := signIn(t, s, "fmkgood:secret", form); c != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a cross-site form signed in: %d %v", resp.StatusCode, c)
	}
	resp, c := signIn(t, s, "fmkgood:secret", consoleHeaders(""))
	if c == nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-in: %d, no cookie", resp.StatusCode)
	}
	if !c.HttpOnly || !c.Secure || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.MaxAge <= 0 {
		t.Errorf("cookie %+v: want HttpOnly, Secure over https, SameSite=Lax, Path=/, an expiry", c)
	}
	if strings.Contains(c.Value, "secret") || strings.Contains(c.Value, "fmkgood") {
		t.Error("the cookie shows the key")
	}
	p, err := s.VerifySession(ctx, consoleHeaders(c.Value))
	if err != nil || p.Subject != "apikey:fmkgood" || p.Bindings[0].Role != "viewer" {
		t.Fatalf("VerifySession: %+v %v", p, err)
	}
	if _, err := s.VerifySession(ctx, consoleHeaders("")); !errors.Is(err, authn.ErrNoSession) {
		t.Errorf("no cookie: %v, want ErrNoSession", err)
	}

	// Forged: any changed byte, or a cookie of another manager.
	forged := []byte(c.Value)
	forged[len(forged)/2] ^= 1
	other := newSessions(t, keys)
	other.cfg.SigningKey = []byte("another key")
	other.seal, _ = newSealer(other.cfg.SigningKey)
	otherValue, _, _ := other.issue("fmkgood", nil)
	for name, v := range map[string]string{"flipped": string(forged), "other manager": otherValue, "garbage": "x.y.z"} {
		if _, err := s.VerifySession(ctx, consoleHeaders(v)); !errors.Is(err, authn.ErrBadCredential) {
			t.Errorf("%s cookie: %v, want ErrBadCredential", name, err)
		}
	}

	// Cross-site uses of a valid cookie.
	for name, edit := range map[string]func(http.Header){
		"no console header":   func(h http.Header) { h.Del(Header) },
		"cross-site fetch":    func(h http.Header) { h.Set("Sec-Fetch-Site", "cross-site") },
		"same-site subdomain": func(h http.Header) { h.Set("Sec-Fetch-Site", "same-site") },
		"other origin":        func(h http.Header) { h.Set("Origin", "https://evil.example") },
		"form post":           func(h http.Header) { h.Set("Content-Type", "application/x-www-form-urlencoded") },
		"text/plain":          func(h http.Header) { h.Set("Content-Type", "text/plain") },
	} {
		h := consoleHeaders(c.Value)
		edit(h)
		if _, err := s.VerifySession(ctx, h); !errors.Is(err, authn.ErrCrossSite) {
			t.Errorf("%s: %v, want ErrCrossSite", name, err)
		}
	}

	// Expired.
	now = now.Add(time.Hour + time.Second)
	if _, err := s.VerifySession(ctx, consoleHeaders(c.Value)); !errors.Is(err, authn.ErrBadCredential) {
		t.Errorf("expired: %v, want ErrBadCredential", err)
	}
	now = now.Add(-time.Hour)

	// Revoking the key ends the session at once.
	keys.mu.Lock()
	keys.revoked = true
	keys.mu.Unlock()
	if _, err := s.VerifySession(ctx, consoleHeaders(c.Value)); !errors.Is(err, authn.ErrBadCredential) {
		t.Errorf("revoked key: %v, want ErrBadCredential", err)
	}
}

func TestSignOutEndsTheSession(t *testing.T) {
	s := newSessions(t, &fakeKeys{})
	ctx := requrl.WithBaseURL(context.Background(), base)
	_, c := signIn(t, s, "fmkgood:secret", consoleHeaders(""))
	if c == nil {
		t.Fatal("no cookie")
	}
	logout := func(h http.Header) *http.Response {
		req := httptest.NewRequest(http.MethodPost, base+Prefix+"logout", nil)
		req.Header = h
		req = req.WithContext(requrl.WithBaseURL(req.Context(), base))
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		return rec.Result()
	}
	// Another site cannot sign the user out either.
	if resp := logout(http.Header{"Cookie": {CookieName + "=" + c.Value}, "Origin": {"https://evil.example"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site sign-out: %d", resp.StatusCode)
	}
	if _, err := s.VerifySession(ctx, consoleHeaders(c.Value)); err != nil {
		t.Fatalf("before sign-out: %v", err)
	}
	resp := logout(consoleHeaders(c.Value))
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("sign-out: %d", resp.StatusCode)
	}
	cleared := false
	for _, rc := range resp.Cookies() {
		cleared = cleared || (rc.Name == CookieName && rc.MaxAge < 0)
	}
	if !cleared {
		t.Error("sign-out did not clear the cookie")
	}
	// The old cookie value, replayed, no longer works.
	if _, err := s.VerifySession(ctx, consoleHeaders(c.Value)); !errors.Is(err, authn.ErrBadCredential) {
		t.Errorf("after sign-out: %v, want ErrBadCredential", err)
	}
}

func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{
		"/v2/domain/d/project/p/runs?x=1": "/v2/domain/d/project/p/runs?x=1",
		"https://evil.example/v2/":        "/v2/",
		"//evil.example/v2/":              "/v2/",
		`/v2/\evil`:                       "/v2/",
		"/metrics":                        "/v2/",
		"":                                "/v2/",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

// A read the browser makes itself (a log link opened in a new tab, an
// address typed in) carries the session without the console's header;
// another site's link, image or frame does not.
func TestVerifyRead(t *testing.T) {
	s := newSessions(t, &fakeKeys{})
	ctx := requrl.WithBaseURL(context.Background(), base)
	_, c := signIn(t, s, "fmkgood:secret", consoleHeaders(""))
	if c == nil {
		t.Fatal("no cookie")
	}
	nav := func(site string) http.Header {
		h := http.Header{"Cookie": {CookieName + "=" + c.Value}}
		if site != "" {
			h.Set("Sec-Fetch-Site", site)
		}
		return h
	}
	for site, want := range map[string]error{"same-origin": nil, "none": nil, "cross-site": authn.ErrCrossSite,
		"same-site": authn.ErrCrossSite, "": authn.ErrCrossSite} {
		if _, err := s.VerifyRead(ctx, nav(site)); !errors.Is(err, want) && !(want == nil && err == nil) {
			t.Errorf("Sec-Fetch-Site %q: %v, want %v", site, err, want)
		}
	}
	if _, err := s.VerifyRead(ctx, consoleHeaders(c.Value)); err != nil {
		t.Errorf("the console's own fetch: %v", err)
	}
	h := nav("same-origin")
	h.Set("Origin", "https://evil.example")
	if _, err := s.VerifyRead(ctx, h); !errors.Is(err, authn.ErrCrossSite) {
		t.Errorf("another origin: %v", err)
	}
	if _, err := s.VerifyRead(ctx, http.Header{"Sec-Fetch-Site": {"same-origin"}}); !errors.Is(err, authn.ErrNoSession) {
		t.Errorf("no cookie: %v", err)
	}
}
