package compose

import (
	"time"

	"fmgr.dev/executor/attempt"
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
	}
}
