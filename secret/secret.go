// Package secret serves flyteidl2.secret.SecretService. Until the secrets
// work item lands every procedure is routed and answers Unimplemented.
package secret

import (
	"net/http"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/secret/secretconnect"
)

// Handlers mounts SecretService.
func Handlers(opts ...connect.HandlerOption) map[string]http.Handler {
	path, h := secretconnect.NewSecretServiceHandler(secretconnect.UnimplementedSecretServiceHandler{}, opts...)
	return map[string]http.Handler{path: h}
}
