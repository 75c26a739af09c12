package config

import "time"

// Auth modes (and AuthAuto, authmode.go).
const (
	AuthOff      = "off"
	AuthRequired = "required"
)

// Auth configures who may call the API (docs/auth.md).
type Auth struct {
	// Mode is "auto" (the default: off while every listener is on
	// loopback, required otherwise; see ResolveAuth), "off" (every caller
	// is anonymous) or "required" (every procedure but
	// AuthMetadataService needs a credential). The SDK sends credentials
	// only over TLS, so "required" goes with server.tls.
	Mode string `mapstructure:"mode" yaml:"mode"`
	// Effective is Mode with "auto" resolved (ResolveAuth; not a
	// configuration key). Empty until resolved.
	Effective string `mapstructure:"-" yaml:"-"`
	// AuthorizationMetadataKey is the header clients put "Bearer <token>"
	// in, advertised by GetPublicClientConfig ("authorization" is also
	// read when it is another).
	AuthorizationMetadataKey string `mapstructure:"authorizationMetadataKey" yaml:"authorizationMetadataKey"`
	// ClientID, RedirectURI, Scopes and Audience are what
	// GetPublicClientConfig advertises to interactive clients.
	ClientID    string   `mapstructure:"clientId" yaml:"clientId"`
	RedirectURI string   `mapstructure:"redirectUri" yaml:"redirectUri"`
	Scopes      []string `mapstructure:"scopes" yaml:"scopes"`
	Audience    string   `mapstructure:"audience" yaml:"audience"`
	// TokenTTL is how long a token from the token endpoint is valid;
	// clients fetch a new one when it is refused.
	TokenTTL time.Duration `mapstructure:"tokenTTL" yaml:"tokenTTL"`
	// BootstrapKey, "<key id>:<secret>", is an admin API key (any project
	// and domain) the manager stores at start unless a key with that id
	// exists, revoked or not: how a deployment provides the first key
	// (the chart generates one into its Secret). Secret: redacted when
	// printed, never logged.
	BootstrapKey string `mapstructure:"bootstrapKey" yaml:"bootstrapKey"`
	// OIDC and Bindings: people from an identity provider (auth_oidc.go).
	OIDC     OIDC          `mapstructure:"oidc" yaml:"oidc"`
	Bindings []AuthBinding `mapstructure:"bindings" yaml:"bindings"`
	// Console is the web console's sign-in (auth_console.go).
	Console ConsoleAuth `mapstructure:"console" yaml:"console"`
}

// Required reports whether callers must authenticate: the resolved mode
// (ResolveAuth), or before resolution an explicit "required".
func (a Auth) Required() bool {
	if a.Effective != "" {
		return a.Effective == AuthRequired
	}
	return a.Mode == AuthRequired
}

func defaultAuth() Auth {
	return Auth{
		Mode:                     AuthAuto,
		AuthorizationMetadataKey: "authorization",
		ClientID:                 "flyte-sdk",
		RedirectURI:              "http://localhost:53593/callback",
		Scopes:                   []string{"all"},
		TokenTTL:                 time.Hour,
		OIDC:                     defaultOIDC(),
		Bindings:                 []AuthBinding{},
		Console:                  defaultConsoleAuth(),
	}
}

func (a Auth) validate(bad func(key, format string, args ...any)) {
	if a.Mode != AuthAuto && a.Mode != AuthOff && a.Mode != AuthRequired {
		bad("auth.mode", "must be %q, %q or %q, got %q", AuthAuto, AuthOff, AuthRequired, a.Mode)
	}
	if a.AuthorizationMetadataKey == "" {
		bad("auth.authorizationMetadataKey", "must not be empty")
	}
	if a.TokenTTL < time.Minute || a.TokenTTL > 24*time.Hour {
		bad("auth.tokenTTL", "must be between 1m and 24h, got %s", a.TokenTTL)
	}
	if a.BootstrapKey != "" {
		if _, _, err := ParseBootstrapKey(a.BootstrapKey); err != nil {
			bad("auth.bootstrapKey", "%v", err)
		}
	}
	a.validateOIDC(bad)
	a.Console.validate(bad)
}
