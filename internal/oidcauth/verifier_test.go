package oidcauth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/oidctest"
)

// clock is a settable time for the key set's refetch bound.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func authConfig(iss *oidctest.Issuer) config.Auth {
	return config.Auth{
		Mode: config.AuthRequired,
		OIDC: config.OIDC{Issuer: iss.URL, Audiences: []string{"other", iss.Audience}, ClientID: iss.ClientID,
			SubjectClaim: "sub", GroupsClaim: "groups"},
		Bindings: []config.AuthBinding{
			{Subject: "alice", Role: "admin"},
			{Group: "ml", Role: "viewer", Project: "flytesnacks", Domain: "development"},
		},
	}
}

func newVerifier(t *testing.T, iss *oidctest.Issuer, opts ...Option) *Verifier {
	t.Helper()
	return New(authConfig(iss), nil, opts...)
}

func TestVerifyGoodTokens(t *testing.T) {
	iss := oidctest.New(t)
	v := newVerifier(t, iss)
	ctx := context.Background()

	p, err := v.Verify(ctx, iss.Token("alice"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Subject != "user:alice" || p.Kind != authn.KindUser ||
		!slices.Equal(p.Bindings, []authn.Binding{{Role: "admin", Project: "*", Domain: "*"}}) {
		t.Errorf("alice: %+v", p)
	}

	// A group binding, the groups claim, and the email as the name.
	c := iss.Claims("bob")
	c["groups"] = []string{"ml", "ops"}
	c["email"] = "bob@example.com"
	p, err = v.Verify(ctx, iss.Sign(c))
	if err != nil {
		t.Fatal(err)
	}
	if p.Subject != "user:bob" || p.Name != "bob@example.com" ||
		!slices.Equal(p.Bindings, []authn.Binding{{Role: "viewer", Project: "flytesnacks", Domain: "development"}}) {
		t.Errorf("bob: %+v", p)
	}

	// Authenticated but bound to nothing: no roles (the interceptor then
	// answers PERMISSION_DENIED).
	p, err = v.Verify(ctx, iss.Token("mallory"))
	if err != nil || len(p.Bindings) != 0 {
		t.Errorf("mallory: %+v, %v", p, err)
	}

	// The audience may be a list, one of which is configured.
	c = iss.Claims("alice")
	c["aud"] = []string{"unrelated", "other"}
	if _, err := v.Verify(ctx, iss.Sign(c)); err != nil {
		t.Errorf("audience list: %v", err)
	}
}

func TestVerifyRefusesBadTokens(t *testing.T) {
	iss := oidctest.New(t)
	v := newVerifier(t, iss)
	ctx := context.Background()
	with := func(edit func(map[string]any)) string {
		c := iss.Claims("alice")
		edit(c)
		return iss.Sign(c)
	}
	none := func() string {
		h, _ := json.Marshal(map[string]string{"alg": "none", "kid": "key-1", "typ": "JWT"})
		p, _ := json.Marshal(iss.Claims("alice"))
		return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(p) + "."
	}
	hmac := func() string {
		return oidctest.SignWith(jose.JSONWebKey{Key: []byte("0123456789abcdef0123456789abcdef"), KeyID: "key-1", Algorithm: string(jose.HS256)}, iss.Claims("alice"))
	}
	for name, tok := range map[string]string{
		"wrong issuer":    with(func(c map[string]any) { c["iss"] = "https://elsewhere.example.com" }),
		"wrong audience":  with(func(c map[string]any) { c["aud"] = "someone-else" }),
		"expired":         with(func(c map[string]any) { c["exp"] = time.Now().Add(-time.Minute).Unix() }),
		"no expiry":       with(func(c map[string]any) { delete(c, "exp") }),
		"not yet valid":   with(func(c map[string]any) { c["nbf"] = time.Now().Add(time.Hour).Unix() }),
		"no subject":      with(func(c map[string]any) { delete(c, "sub") }),
		"bad signature":   oidctest.SignWith(oidctest.NewKey("key-1"), iss.Claims("alice")),
		"unknown key":     oidctest.SignWith(oidctest.NewKey("key-9"), iss.Claims("alice")),
		"alg none":        none(),
		"alg HS256":       hmac(),
		"tampered":        tamper(iss.Token("alice")),
		"not a JWT":       "fmt1.abc.def",
		"API key":         "fmk0123:secret",
		"truncated JWT":   strings.Join(strings.Split(iss.Token("alice"), ".")[:2], "."),
		"garbage in JWT":  "eyJ.!!.!!",
		"empty signature": strings.Join(append(strings.Split(iss.Token("alice"), ".")[:2], ""), "."),
	} {
		if _, err := v.Verify(ctx, tok); !errors.Is(err, authn.ErrBadCredential) {
			t.Errorf("%s: %v, want ErrBadCredential", name, err)
		}
	}
}

// tamper changes the payload of a signed token (alice becomes root).
func tamper(tok string) string {
	parts := strings.Split(tok, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var c map[string]any
	_ = json.Unmarshal(raw, &c)
	c["sub"] = "root"
	raw, _ = json.Marshal(c)
	parts[1] = base64.RawURLEncoding.EncodeToString(raw)
	return strings.Join(parts, ".")
}

// A token signed with a key the verifier has not seen refetches the key
// set (the provider rotated), but at most once per bound: made-up key ids
// do not make it fetch on every request.
func TestVerifyKeyRotation(t *testing.T) {
	iss := oidctest.New(t)
	clk := &clock{t: time.Now()}
	v := newVerifier(t, iss, WithClock(clk.now), WithMinKeyRefresh(time.Minute))
	ctx := context.Background()
	if _, err := v.Verify(ctx, iss.Token("alice")); err != nil {
		t.Fatal(err)
	}
	iss.Rotate()
	rotated := iss.Token("alice")
	if _, err := v.Verify(ctx, rotated); !errors.Is(err, authn.ErrBadCredential) {
		t.Fatalf("new key within the refetch bound: %v, want ErrBadCredential", err)
	}
	clk.add(time.Minute)
	if _, err := v.Verify(ctx, rotated); err != nil {
		t.Fatalf("new key after the bound: %v", err)
	}
}

// An unreachable provider is not a bad credential: the caller may retry
// (UNAVAILABLE), and a non-JWT is refused without asking it.
func TestVerifyProviderDown(t *testing.T) {
	iss := oidctest.New(t)
	cfg := authConfig(iss)
	cfg.OIDC.Issuer = "http://127.0.0.1:1"
	v := New(cfg, &http.Client{Timeout: 5 * time.Second})
	_, err := v.Verify(context.Background(), iss.Token("alice"))
	if err == nil || errors.Is(err, authn.ErrBadCredential) || !errors.Is(err, ErrProviderUnavailable) {
		t.Errorf("provider down: %v, want ErrProviderUnavailable", err)
	}
	if _, err := v.Verify(context.Background(), "fmk0:secret"); !errors.Is(err, authn.ErrBadCredential) {
		t.Errorf("API key with the provider down: %v", err)
	}
}

// A discovery document naming another issuer is not trusted.
func TestDiscoveryIssuerMismatch(t *testing.T) {
	iss := oidctest.New(t)
	d := NewDiscovery(iss.URL+"/", nil)
	if _, err := d.Endpoints(context.Background()); err != nil {
		t.Fatalf("trailing slash: %v", err)
	}
	d = NewDiscovery(strings.Replace(iss.URL, "127.0.0.1", "localhost", 1), nil)
	if _, err := d.Endpoints(context.Background()); !errors.Is(err, ErrProviderUnavailable) {
		t.Errorf("mismatched issuer: %v", err)
	}
}
