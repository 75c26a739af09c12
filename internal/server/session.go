package server

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"fmgr.dev/internal/authn"
)

var errBadSession = connect.NewError(connect.CodeUnauthenticated, errors.New("the console session is not valid (expired, signed out or its key revoked): sign in again"))

// sessionResult turns what the console's session verifier answered into
// the caller's context or a Connect error: a forged, expired or revoked
// session is UNAUTHENTICATED (the console shows its sign-in page), a
// cross-site use of the cookie PERMISSION_DENIED.
func (s *Server) sessionResult(ctx context.Context, procedure string, p authn.Principal, err error) (context.Context, error) {
	switch {
	case err == nil:
		return authn.WithPrincipal(ctx, p), nil
	case errors.Is(err, authn.ErrCrossSite):
		return ctx, connect.NewError(connect.CodePermissionDenied, authn.ErrCrossSite)
	case errors.Is(err, authn.ErrBadCredential):
		return ctx, errBadSession
	}
	s.log.WarnContext(ctx, "could not verify a console session", "procedure", procedure, "error", err)
	return ctx, connect.NewError(connect.CodeUnavailable, errors.New("could not verify the session now; retry"))
}
