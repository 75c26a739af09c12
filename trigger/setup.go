package trigger

import "fmgr.dev/internal/server"

// Setup mounts TriggerService on srv.
func Setup(srv *server.Server, svc *Service) error {
	return srv.Mount(server.NewService(svc.Handler(srv.HandlerOptions()...)))
}
