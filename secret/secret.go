// Package secret serves flyteidl2.secret.SecretService and delivers secrets
// to the attempts that request them. Values are sealed at rest with
// AES-256-GCM (keyring.go); the API takes values and returns metadata
// only; the executor's attempt core gets values through Service.Hook.
package secret

import (
	"context"
	"fmt"
	"log/slog"

	"gorm.io/gorm"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/gen/go/flyteidl2/secret/secretconnect"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/db"
	"fmgr.dev/internal/server"
	"fmgr.dev/internal/store"
)

// Open opens the keyring cfg names (generating the default one on first
// start) and returns the service over the secrets in g. A generated keyring
// is logged (never its key): managers sharing a PostgreSQL database must
// share one keyring, which a keyring generated per data dir is not.
func Open(g *gorm.DB, cfg config.Secrets, home string, log *slog.Logger) (*Service, error) {
	keys, err := OpenKeyring(cfg, home)
	if err != nil {
		return nil, err
	}
	if keys.Generated() && log != nil {
		level := slog.LevelInfo
		if db.Dialect(g) == db.Postgres {
			level = slog.LevelWarn
		}
		log.Log(context.Background(), level, "generated the secrets keyring; every manager on this database needs the same one (secrets.keyFile or secrets.key)",
			"keyFile", keys.Path())
	}
	return NewService(NewStore(g, keys)), nil
}

// Setup mounts SecretService on srv.
func Setup(srv *server.Server, svc *Service) error {
	return srv.Mount(server.NewService(secretconnect.NewSecretServiceHandler(svc, srv.HandlerOptions()...)))
}

// Hook is the attempt core's way to the values of the secrets a task
// requests.
func (s *Service) Hook() attempt.SecretHook { return hook{s.store} }

type hook struct{ store *Store }

// Values resolves each name for a's project and domain, cascading to the
// domain and then the org.
func (h hook) Values(ctx context.Context, a *store.Action, names []string) (map[string][]byte, error) {
	scope := Scope{Org: a.Org, Domain: a.Domain, Project: a.Project}
	out := make(map[string][]byte, len(names))
	for _, n := range names {
		v, ok, err := h.store.Resolve(ctx, scope, n)
		if err != nil {
			return nil, fmt.Errorf("secrets of %s: %w", a.ActionKey, err)
		}
		if ok {
			out[n] = v
		}
	}
	return out, nil
}
