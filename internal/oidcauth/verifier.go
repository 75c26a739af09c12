package oidcauth

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/config"
)

// defaultMinRefresh bounds how often an unknown key id refetches the
// provider's key set.
const defaultMinRefresh = 15 * time.Second

// Verifier verifies the provider's JWTs (authn.Verifier).
type Verifier struct {
	cfg      config.OIDC
	bindings []config.AuthBinding
	disc     *Discovery
	keys     *keySet
	verifier *oidc.IDTokenVerifier
	now      func() time.Time
}

// Option adjusts a Verifier (tests).
type Option func(*Verifier)

// WithClock makes the verifier read the time from now.
func WithClock(now func() time.Time) Option {
	return func(v *Verifier) { v.now, v.disc.now, v.keys.now = now, now, now }
}

// WithMinKeyRefresh bounds key set refetches to one per d.
func WithMinKeyRefresh(d time.Duration) Option { return func(v *Verifier) { v.keys.minRefresh = d } }

// New returns the verifier of auth.oidc, talking to the provider over
// client (nil for http.DefaultClient) once the first token arrives.
func New(auth config.Auth, client *http.Client, opts ...Option) *Verifier {
	disc := NewDiscovery(auth.OIDC.Issuer, client)
	v := &Verifier{cfg: auth.OIDC, bindings: auth.Bindings, disc: disc, now: time.Now,
		keys: &keySet{disc: disc, minRefresh: defaultMinRefresh, now: time.Now}}
	for _, o := range opts {
		o(v)
	}
	v.verifier = oidc.NewVerifier(disc.issuer, v.keys, &oidc.Config{
		// The audience is checked against the list below; go-oidc checks
		// a single client id only.
		SkipClientIDCheck:    true,
		SupportedSigningAlgs: algNames(),
		Now:                  func() time.Time { return v.now() },
	})
	return v
}

// Discovery is the provider's discovery (its endpoints).
func (v *Verifier) Discovery() *Discovery { return v.disc }

// Verify implements authn.Verifier: a JWT the provider signed, for one of
// the audiences, unexpired and already valid, is the person its subject
// claim names, with the roles auth.bindings give them or their groups. A
// credential that is not a JWT is ErrBadCredential at once (an API key's
// verifier may take it); a provider that cannot be reached is an error
// the caller may retry.
func (v *Verifier) Verify(ctx context.Context, credential string) (authn.Principal, error) {
	if !looksLikeJWT(credential) {
		return authn.Principal{}, authn.ErrBadCredential
	}
	if _, err := v.disc.Endpoints(ctx); err != nil {
		return authn.Principal{}, err
	}
	tok, err := v.verifier.Verify(ctx, credential)
	if err != nil {
		return authn.Principal{}, fmt.Errorf("%w: %v", authn.ErrBadCredential, err)
	}
	if !slices.ContainsFunc(tok.Audience, func(a string) bool { return slices.Contains(v.cfg.Audiences, a) }) {
		return authn.Principal{}, fmt.Errorf("%w: audience %v is not one of auth.oidc.audiences", authn.ErrBadCredential, tok.Audience)
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return authn.Principal{}, fmt.Errorf("%w: %v", authn.ErrBadCredential, err)
	}
	subject, _ := claims[v.cfg.SubjectClaim].(string)
	if subject == "" {
		return authn.Principal{}, fmt.Errorf("%w: the token has no %q claim", authn.ErrBadCredential, v.cfg.SubjectClaim)
	}
	groups := stringsClaim(claims[v.cfg.GroupsClaim])
	return authn.Principal{
		Subject:  "user:" + subject,
		Name:     displayName(claims, subject),
		Kind:     authn.KindUser,
		Bindings: v.bind(subject, groups, clientOf(claims)),
	}, nil
}

// bind is the roles auth.bindings give subject, groups and the client the
// token was issued to; none is a caller who authenticates but may do
// nothing (PERMISSION_DENIED).
func (v *Verifier) bind(subject string, groups []string, client string) []authn.Binding {
	var out []authn.Binding
	for _, b := range v.bindings {
		if (b.Subject != "" && b.Subject == subject) || (b.Group != "" && slices.Contains(groups, b.Group)) ||
			(b.Client != "" && b.Client == client) {
			out = append(out, authn.Binding{Role: b.Role, Project: orAny(b.Project), Domain: orAny(b.Domain)})
		}
	}
	return out
}

func orAny(s string) string {
	if s == "" {
		return "*"
	}
	return s
}

// looksLikeJWT is a compact JWS: three base64url parts, the header a JSON
// object ("eyJ" is base64url of `{"`).
func looksLikeJWT(s string) bool {
	return strings.HasPrefix(s, "eyJ") && strings.Count(s, ".") == 2
}

// stringsClaim reads a groups claim: a list of strings, or one string.
func stringsClaim(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func displayName(claims map[string]any, subject string) string {
	for _, c := range []string{"email", "preferred_username", "name"} {
		if s, ok := claims[c].(string); ok && s != "" {
			return s
		}
	}
	return subject
}
