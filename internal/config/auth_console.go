package config

import "time"

// ConsoleAuth is how people sign in to the web console when auth.mode is
// required (docs/auth.md "Console sign-in"): through auth.oidc's provider
// (the authorization code flow with PKCE, the manager the client) or with
// an API key, either way into a session cookie the manager signs.
type ConsoleAuth struct {
	// SessionTTL is how long a console session lasts before its holder
	// signs in again.
	SessionTTL time.Duration `mapstructure:"sessionTTL" yaml:"sessionTTL"`
	// ClientID is the provider's client the console signs in with;
	// auth.oidc.clientId when empty. Its redirect URI must allow
	// <the manager's URL>/console/auth/callback.
	ClientID string `mapstructure:"clientId" yaml:"clientId"`
	// ClientSecret makes the manager a confidential client (sent with the
	// code exchange); empty for a public client, which PKCE protects.
	ClientSecret string `mapstructure:"clientSecret" yaml:"clientSecret"`
	// Scopes are asked for at sign-in ("openid" is always sent).
	Scopes []string `mapstructure:"scopes" yaml:"scopes"`
	// ProviderName is the provider's name on the sign-in button ("Sign in
	// with <name>"); the issuer's host when empty.
	ProviderName string `mapstructure:"providerName" yaml:"providerName"`
}

func defaultConsoleAuth() ConsoleAuth {
	return ConsoleAuth{SessionTTL: 8 * time.Hour, Scopes: []string{"openid", "profile", "email"}}
}

func (c ConsoleAuth) validate(bad func(key, format string, args ...any)) {
	if c.SessionTTL < time.Minute || c.SessionTTL > 30*24*time.Hour {
		bad("auth.console.sessionTTL", "must be between 1m and 720h, got %s", c.SessionTTL)
	}
}

// ConsoleClientID is the client the console signs in with at the provider.
func (a Auth) ConsoleClientID() string {
	if a.Console.ClientID != "" {
		return a.Console.ClientID
	}
	return a.OIDC.ClientID
}
