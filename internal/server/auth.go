package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/authz"
)

// Auth turns authentication on (auth.mode required): every procedure but
// the anonymous ones (authn.Anonymous) needs a bearer credential in
// Header ("authorization" when empty) that Verifier accepts.
type Auth struct {
	Header   string
	Verifier authn.Verifier
	// Session, when set, authenticates requests without a bearer
	// credential by the console's session cookie (session.go).
	Session authn.SessionVerifier
}

// RequireAuth makes every Connect call authenticate (see Auth). Call it
// before Serve; services built before it are covered too, because the
// interceptor reads it per call.
func (s *Server) RequireAuth(a Auth) {
	if a.Header == "" {
		a.Header = "authorization"
	}
	s.auth.Store(&a)
}

// AuthRequired reports whether RequireAuth was called.
func (s *Server) AuthRequired() bool { return s.auth.Load() != nil }

// errNoCredential and errBadCredential are what a caller without a
// (valid) credential hears: UNAUTHENTICATED, on which the SDK fetches a
// token and retries.
var (
	errNoCredential  = connect.NewError(connect.CodeUnauthenticated, errors.New("this flyte-manager requires a credential: send a bearer token (an API key, see `flyte-manager apikey create`)"))
	errBadCredential = connect.NewError(connect.CodeUnauthenticated, authn.ErrBadCredential)
)

// authInterceptor authenticates every handler call, unary and streams,
// before the handler (and the stream caps) see it.
type authInterceptor struct{ s *Server }

func (i *authInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		ctx, err := i.s.authenticate(ctx, req.Spec().Procedure, req.Header())
		if err != nil {
			return nil, err
		}
		if err := authorize(ctx, req.Spec().Procedure, req.Any()); err != nil {
			return nil, err
		}
		resp, err := next(ctx, req)
		if err == nil && resp != nil {
			filterAnswer(ctx, req.Spec().Procedure, resp.Any())
		}
		return resp, err
	}
}

func (i *authInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i *authInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		ctx, err := i.s.authenticate(ctx, conn.Spec().Procedure, conn.RequestHeader())
		if err != nil {
			return err
		}
		if _, ok := authn.FromContext(ctx); !ok {
			return next(ctx, conn)
		}
		if conn.Spec().StreamType != connect.StreamTypeServer {
			// A client or bidi stream's handler may act before it reads
			// a message: authorize it as naming no project (a role on
			// every project), before the handler runs.
			if err := authorize(ctx, conn.Spec().Procedure, nil); err != nil {
				return err
			}
			return next(ctx, conn)
		}
		return next(ctx, &authorizedConn{StreamingHandlerConn: conn, ctx: ctx})
	}
}

// authenticate returns ctx carrying the caller's principal. With auth off,
// or for an anonymous procedure, ctx is returned as is.
func (s *Server) authenticate(ctx context.Context, procedure string, h http.Header) (context.Context, error) {
	a := s.auth.Load()
	if a == nil || authn.Anonymous(procedure) {
		return ctx, nil
	}
	token := authn.Bearer(h.Get(a.Header))
	if token == "" && a.Header != "authorization" {
		token = authn.Bearer(h.Get("authorization"))
	}
	if token == "" && a.Session != nil {
		if p, err := a.Session.VerifySession(ctx, h); !errors.Is(err, authn.ErrNoSession) {
			return s.sessionResult(ctx, procedure, p, err)
		}
	}
	if token == "" {
		return ctx, errNoCredential
	}
	p, err := a.Verifier.Verify(ctx, token)
	if errors.Is(err, authn.ErrBadCredential) {
		return ctx, errBadCredential
	}
	if err != nil {
		// Verification could not finish (the database is down): the
		// caller may retry; the detail stays in the log.
		s.log.WarnContext(ctx, "could not verify a credential", "procedure", procedure, "error", err)
		return ctx, connect.NewError(connect.CodeUnavailable, errors.New("could not verify the credential now; retry"))
	}
	return authn.WithPrincipal(ctx, p), nil
}

// authorize checks the caller's roles (internal/authz) against what
// procedure needs on the project and domain msg names. Without a principal
// (auth off, an anonymous procedure) there is nothing to check. A denial
// is PERMISSION_DENIED, worded so the SDK does not take it for a stale
// credential.
func authorize(ctx context.Context, procedure string, msg any) error {
	p, ok := authn.FromContext(ctx)
	if !ok {
		return nil
	}
	action, known := authz.Procedures[procedure]
	if !known {
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s has no permission entry on this flyte-manager; only its operator can add one", procedure))
	}
	m, _ := msg.(proto.Message)
	if p.Kind == authn.KindTask {
		if authz.AllowedTask(p.Run, procedure, m) {
			return nil
		}
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("a task's credential may call %s only about its own run %q (project %q domain %q)", procedure, p.Run.Run, p.Run.Project, p.Run.Domain))
	}
	if authz.Internal[procedure] {
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s is the manager's own: only its tasks may call it, with the credential they are given", procedure))
	}
	project, domain, allowed := authz.AllowedRequest(p.Bindings, procedure, action, m)
	if allowed {
		return nil
	}
	where := "without naming a project"
	if project != "" {
		where = fmt.Sprintf("in project %q domain %q", project, domain)
	}
	return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s may not %s %s (%s): its roles do not allow it", p.Subject, action, where, procedure))
}

// authorizedConn checks a server stream's request message before the
// handler sees it.
type authorizedConn struct {
	connect.StreamingHandlerConn
	ctx     context.Context
	checked bool
}

func (c *authorizedConn) Receive(msg any) error {
	if err := c.StreamingHandlerConn.Receive(msg); err != nil {
		return err
	}
	if !c.checked {
		c.checked = true
		return authorize(c.ctx, c.Spec().Procedure, msg)
	}
	return nil
}
