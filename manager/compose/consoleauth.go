package compose

import (
	"log/slog"
	"net/url"

	"gorm.io/gorm"

	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/consoleauth"
	"fmgr.dev/internal/oidcauth"
	"fmgr.dev/internal/server"
)

// setupConsoleSignIn serves the console's sign-in (internal/consoleauth)
// when auth is required and the built-in console is on, and answers the
// session verifier for the auth interceptor (nil when there is none).
func setupConsoleSignIn(cfg *config.Config, gdb *gorm.DB, srv *server.Server, logger *slog.Logger) (authn.SessionVerifier, error) {
	if !cfg.Auth.Required() || !cfg.Console.Enabled || cfg.Console.App != "" {
		return nil, nil
	}
	c := consoleauth.Config{
		SigningKey: []byte(cfg.Storage.SigningKey),
		TTL:        cfg.Auth.Console.SessionTTL,
		Keys:       newIssuer(cfg, gdb),
		Log:        logger,
	}
	if o := cfg.Auth.OIDC; o.Enabled() {
		c.Users = oidcauth.New(cfg.Auth, nil)
		c.ClientID, c.ClientSecret, c.Scopes = cfg.Auth.ConsoleClientID(), cfg.Auth.Console.ClientSecret, cfg.Auth.Console.Scopes
		c.ProviderName = cfg.Auth.Console.ProviderName
		if u, err := url.Parse(o.Issuer); err == nil && c.ProviderName == "" {
			c.ProviderName = u.Hostname()
		}
	}
	sessions, err := consoleauth.New(c)
	if err != nil {
		return nil, err
	}
	if err := srv.Handle(server.Route{Pattern: consoleauth.Prefix, Handler: sessions.Handler()}); err != nil {
		return nil, err
	}
	return sessions, nil
}
