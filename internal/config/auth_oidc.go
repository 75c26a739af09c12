package config

import (
	"net/url"
	"slices"
	"strings"
)

// OIDC trusts tokens from an external OpenID Connect provider (docs/auth.md
// "Signing in through an identity provider"): people sign in with the
// SDK's Pkce or DeviceFlow at the provider, and the manager verifies the
// JWT access tokens it issues. Off while Issuer is empty.
type OIDC struct {
	// Issuer is the provider's issuer URL: its discovery document is at
	// <issuer>/.well-known/openid-configuration and must name the same
	// issuer. https, or http on a loopback address (tests).
	Issuer string `mapstructure:"issuer" yaml:"issuer"`
	// Audiences are the "aud" values a token may carry (at least one must
	// match): the API audience at Okta/Auth0, the client id at Keycloak
	// (with an audience mapper) or Google.
	Audiences []string `mapstructure:"audiences" yaml:"audiences"`
	// ClientID is the provider's public client (no secret) the SDK's Pkce
	// and DeviceFlow use, advertised by GetPublicClientConfig.
	ClientID string `mapstructure:"clientId" yaml:"clientId"`
	// Scopes are what the SDK asks the provider for (offline_access gets
	// a refresh token, so a session outlives one access token).
	Scopes []string `mapstructure:"scopes" yaml:"scopes"`
	// Audience is the "audience" parameter the SDK sends to the provider
	// (Auth0, Okta); empty for providers that take none.
	Audience string `mapstructure:"audience" yaml:"audience"`
	// SubjectClaim names the claim that identifies a person ("sub";
	// "email" is friendlier when the provider guarantees it).
	SubjectClaim string `mapstructure:"subjectClaim" yaml:"subjectClaim"`
	// GroupsClaim names the claim listing a person's groups ("groups").
	GroupsClaim string `mapstructure:"groupsClaim" yaml:"groupsClaim"`
}

// Enabled reports whether an issuer is configured.
func (o OIDC) Enabled() bool { return o.Issuer != "" }

// AuthBinding grants Role on Project and Domain ("*" or empty for any) to
// a provider's Subject (the SubjectClaim's value), to everyone in Group, or
// to every token issued to the provider's confidential Client (its
// client_credentials machine client; internal/oidcauth/clients.go).
type AuthBinding struct {
	Subject string `mapstructure:"subject" yaml:"subject"`
	Group   string `mapstructure:"group" yaml:"group"`
	Client  string `mapstructure:"client" yaml:"client"`
	Role    string `mapstructure:"role" yaml:"role"`
	Project string `mapstructure:"project" yaml:"project"`
	Domain  string `mapstructure:"domain" yaml:"domain"`
}

func defaultOIDC() OIDC {
	return OIDC{
		Audiences:    []string{},
		Scopes:       []string{"openid", "profile", "email", "offline_access"},
		SubjectClaim: "sub",
		GroupsClaim:  "groups",
	}
}

func (a Auth) validateOIDC(bad func(key, format string, args ...any)) {
	o := a.OIDC
	if o.Enabled() {
		if a.Mode == AuthOff {
			bad("auth.oidc.issuer", "needs auth.mode %q or %q", AuthRequired, AuthAuto)
		}
		u, err := url.Parse(o.Issuer)
		switch {
		case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
			bad("auth.oidc.issuer", "must be an absolute https:// URL, got %q", o.Issuer)
		case u.Scheme == "http" && !IsLoopbackHost(u.Hostname()):
			bad("auth.oidc.issuer", "must be https:// (http:// only on a loopback address), got %q", o.Issuer)
		}
		if len(o.Audiences) == 0 {
			bad("auth.oidc.audiences", "must name at least one audience a token must carry")
		}
		if o.ClientID == "" {
			bad("auth.oidc.clientId", "must name the provider's public client for the SDK's Pkce and DeviceFlow")
		}
		if o.SubjectClaim == "" {
			bad("auth.oidc.subjectClaim", "must not be empty")
		}
	}
	for i, b := range a.Bindings {
		if n := len(slices.DeleteFunc([]string{b.Subject, b.Group, b.Client}, func(s string) bool { return s == "" })); n != 1 {
			bad("auth.bindings", "binding %d must name exactly one of subject, group or client", i)
		}
		if b.Client != "" && b.Client == o.ClientID {
			bad("auth.bindings", "binding %d: client %q is auth.oidc.clientId, the public client people sign in with; bind a confidential machine client", i, b.Client)
		}
		if b.Role != "viewer" && b.Role != "contributor" && b.Role != "admin" {
			bad("auth.bindings", "binding %d: role must be viewer, contributor or admin, got %q", i, b.Role)
		}
		if strings.ContainsAny(b.Project+b.Domain, " \t\n") {
			bad("auth.bindings", "binding %d: project and domain are names or \"*\"", i)
		}
	}
	if len(a.Bindings) > 0 && !o.Enabled() {
		bad("auth.bindings", "bind subjects and groups of an identity provider: set auth.oidc.issuer")
	}
}
