package compose

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"gorm.io/gorm"

	"fmgr.dev/apikey"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/server"
)

// authNotices are what the manager says at start about auth.mode (see
// docs/auth.md, Modes), loudly where it matters: in the log, in the
// banner, and for auth off beyond loopback in /readyz too.
type authNotices struct {
	// exposed: auth.mode off while these listeners reach beyond loopback.
	exposed []string
	// noWayIn: auth required, no API key and no identity provider yet.
	noWayIn bool
	// auto: auth.mode auto resolved to required (the listeners beyond
	// loopback, or an identity provider).
	auto bool
}

// noticeAuthMode logs what the resolved auth.mode means and registers the
// /readyz detail; its result goes into the banner (printAuthNotices).
func noticeAuthMode(ctx context.Context, logger *slog.Logger, cfg *config.Config, gdb *gorm.DB, srv *server.Server) authNotices {
	var n authNotices
	logger.Info("auth", "mode", cfg.Auth.Mode, "effective", cfg.Auth.Effective)
	n.auto = cfg.Auth.Mode == config.AuthAuto && cfg.Auth.Required()
	if n.exposed = cfg.AuthOffButExposed(); len(n.exposed) > 0 {
		addrs := strings.Join(n.exposed, ", ")
		logger.Warn("SERVING WITHOUT AUTHENTICATION ON A NON-LOOPBACK ADDRESS (auth.mode off): anyone who can reach these addresses can run any command as this user through CreateRun; set auth.mode to required (or auto), bind to 127.0.0.1, or firewall the ports",
			"addrs", addrs)
		detail := server.Detail("auth.mode off while listening beyond loopback on " + addrs + ": anyone who reaches them can run any command")
		srv.AddReadinessCheck("auth", func(context.Context) error { return detail })
		return n
	}
	if !cfg.Auth.Required() || cfg.Auth.OIDC.Enabled() {
		return n
	}
	keys, err := apikey.NewStore(gdb).List(ctx)
	if err != nil {
		logger.Warn("could not count API keys", "error", err)
		return n
	}
	for _, k := range keys {
		if k.RevokedAt == nil {
			return n
		}
	}
	n.noWayIn = true
	logger.Warn("auth is required and no API key exists yet: nobody can call the API until one is minted with `flyte-manager apikey create --role admin` (with this manager's configuration); see docs/auth.md",
		"mode", cfg.Auth.Mode)
	return n
}

// printAuthNotices adds the notices to the banner.
func printAuthNotices(w io.Writer, n authNotices) {
	if n.auto {
		fmt.Fprint(w, "\nAuthentication is required (auth.mode auto: a listener reaches beyond loopback, or auth.oidc is set).\n")
	}
	if len(n.exposed) > 0 {
		fmt.Fprintf(w, `
WARNING: AUTHENTICATION IS OFF (auth.mode: off) while listening beyond loopback on
  %s
Anyone who reaches these addresses can run any command as this user. Set auth.mode to
required (docs/auth.md), bind them to 127.0.0.1, or make sure only trusted clients reach them.
`, strings.Join(n.exposed, "\n  "))
	}
	if n.noWayIn {
		fmt.Fprint(w, `
Authentication is required and no API key exists yet. Mint the first admin key with this
manager's configuration (the same --config, --home and FLYTE_MANAGER_* environment):
  flyte-manager apikey create --role admin --name admin
and give it to the SDK as FLYTE_API_KEY (docs/auth.md).
`)
	}
}

// ensureBootstrapKey stores auth.bootstrapKey, the admin key a deployment
// provides (the chart's Secret), unless its id exists already.
func ensureBootstrapKey(ctx context.Context, logger *slog.Logger, cfg *config.Config, gdb *gorm.DB) error {
	if cfg.Auth.BootstrapKey == "" {
		return nil
	}
	id, secret, err := config.ParseBootstrapKey(cfg.Auth.BootstrapKey)
	if err != nil {
		return fmt.Errorf("auth.bootstrapKey: %w", err)
	}
	stored, err := apikey.NewStore(gdb).EnsureBootstrap(ctx, id, secret)
	if err != nil {
		return err
	}
	if stored {
		logger.Info("stored the bootstrap API key (auth.bootstrapKey)", "keyID", id)
	}
	return nil
}
