package runs

import (
	"context"
	"log/slog"

	"fmgr.dev/internal/config"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/server"
	"fmgr.dev/internal/store"
)

// Setup mounts RunService (over state), TaskService and ProjectService
// (over st, the store state is built over) and the two identity services on
// srv, after seeding the configured projects so the first request already
// finds them.
func Setup(ctx context.Context, srv *server.Server, state *runstate.Service, st *store.Store, projects config.Projects, log *slog.Logger, opts ...Option) error {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	projectService := NewProjectService(st, projects, log)
	if err := projectService.Seed(ctx); err != nil {
		return err
	}
	handlerOpts := srv.HandlerOptions()
	identities := NewIdentityServices(o.auth)
	return srv.Mount(
		server.NewService(NewRunService(state).Handler(handlerOpts...)),
		server.NewService(NewTaskService(st, state, projects, log).WithTriggers(o.triggers).Handler(handlerOpts...)),
		server.NewService(projectService.Handler(handlerOpts...)),
		server.NewService(identities.Identity.Handler(handlerOpts...)),
		server.NewService(identities.AuthMetadata.Handler(handlerOpts...)),
	)
}
