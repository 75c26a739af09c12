// Package secret serves flyteidl2.secret.SecretService. Until the secrets
// work item lands every procedure is routed and answers Unimplemented.
package secret

import (
	"fmgr.dev/gen/go/flyteidl2/secret/secretconnect"
	"fmgr.dev/internal/server"
)

// Setup mounts SecretService on srv.
func Setup(srv *server.Server) error {
	return srv.Mount(server.NewService(secretconnect.NewSecretServiceHandler(secretconnect.UnimplementedSecretServiceHandler{}, srv.HandlerOptions()...)))
}
