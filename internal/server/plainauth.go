package server

import (
	"context"
	"errors"
	"net/http"

	"google.golang.org/protobuf/proto"

	"fmgr.dev/internal/authn"
)

// AuthorizeRead authenticates and authorizes a plain GET route that shows
// what procedure would answer about msg (the log page of an attempt is
// TailLogs as text), as the auth interceptor does the procedure: a bearer
// credential, or the console's session for a read the browser makes from
// the console's origin or on its user's own (a link opened in a new tab,
// an address typed in). With auth off it answers r's context as is. Its
// errors are Connect errors (UNAUTHENTICATED, PERMISSION_DENIED,
// UNAVAILABLE).
func (s *Server) AuthorizeRead(r *http.Request, procedure string, msg proto.Message) (context.Context, error) {
	a := s.auth.Load()
	ctx := r.Context()
	if a == nil {
		return ctx, nil
	}
	var err error
	if a.Session != nil && authn.Bearer(r.Header.Get(a.Header)) == "" && authn.Bearer(r.Header.Get("authorization")) == "" {
		p, verr := a.Session.VerifyRead(ctx, r.Header)
		if errors.Is(verr, authn.ErrNoSession) {
			return ctx, errNoCredential
		}
		ctx, err = s.sessionResult(ctx, procedure, p, verr)
	} else {
		ctx, err = s.authenticate(ctx, procedure, r.Header)
	}
	if err != nil {
		return ctx, err
	}
	return ctx, authorize(ctx, procedure, msg)
}
