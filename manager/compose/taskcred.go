package compose

import (
	"context"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/app"
	"fmgr.dev/executor/attempt"
	"fmgr.dev/internal/appcred"
	"fmgr.dev/internal/appruntime"
	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/store"
	"fmgr.dev/internal/taskcred"
)

// Task credentials (docs/auth.md): with auth.mode required every attempt
// gets a credential of its own, derived from the manager's signing key,
// that allows only calls about its run, and lives as long as the attempt
// may (plus the same grace as its storage key).

// taskCredentialKey is the key task credentials are signed with.
func taskCredentialKey(cfg *config.Config) *taskcred.Key {
	return taskcred.DeriveKey(cfg.Storage.SigningKey)
}

// taskCredentials is the attempts' credential hook; nil with auth off.
func taskCredentials(cfg *config.Config) *attempt.CredentialAccess {
	if !cfg.Auth.Required() {
		return nil
	}
	key := taskCredentialKey(cfg)
	// A local attempt reaches the manager on loopback, where no one can
	// stand in between, by an address a configured certificate need not
	// name; a Pod verifies a configured certificate, and trusts the
	// generated one (which no Pod has).
	skipVerify := cfg.Executor.Type != config.ExecutorKubernetes || cfg.Server.TLS.CertFile == ""
	return &attempt.CredentialAccess{
		TLS:        cfg.Server.TLS.Enabled,
		SkipVerify: cfg.Server.TLS.Enabled && skipVerify,
		Mint: func(a *store.Action, valid time.Duration) string {
			life := scopedKeyUnlimited
			if valid > 0 {
				life = valid + scopedKeyGrace
			}
			return key.Mint(authn.RunScope{Org: a.Org, Project: a.Project, Domain: a.Domain, Run: a.RunName}, a.Name, time.Now().Add(life))
		},
		MintApp: func(k appruntime.Key) string {
			return appCredentialKey(cfg, nil).Mint(appcred.App{Org: k.Org, Project: k.Project, Domain: k.Domain, Name: k.Name})
		},
	}
}

// appCredentialKey is the key apps' credentials are signed with; a
// credential verifies while its app is in apps and not stopped (nil gdb:
// for minting only).
func appCredentialKey(cfg *config.Config, gdb *gorm.DB) *appcred.Key {
	var alive appcred.Alive
	if gdb != nil {
		apps := app.NewStore(gdb)
		alive = func(ctx context.Context, a appcred.App) (bool, error) {
			return apps.Running(ctx, app.Key{Org: a.Org, Project: a.Project, Domain: a.Domain, Name: a.Name})
		}
	}
	return appcred.DeriveKey(cfg.Storage.SigningKey, alive)
}
