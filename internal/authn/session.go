package authn

import (
	"context"
	"errors"
	"net/http"
)

// SessionVerifier authenticates a browser's request by its session cookie
// (the console's sign-in, internal/consoleauth) when it carries no bearer
// credential.
type SessionVerifier interface {
	// VerifySession returns ErrNoSession when h carries no session
	// cookie, ErrBadCredential (possibly wrapped) for a session that is
	// forged, expired, signed out or whose key was revoked, ErrCrossSite
	// for a request that is not the console's own (a cross-site form,
	// another origin's page); any other error is internal.
	VerifySession(ctx context.Context, h http.Header) (Principal, error)
	// VerifyRead is VerifySession for a plain GET the browser makes
	// itself (a link the console opens in a new tab): without the
	// console's header, but only from the console's origin or on the
	// user's own (Sec-Fetch-Site same-origin or none).
	VerifyRead(ctx context.Context, h http.Header) (Principal, error)
}

// ErrNoSession is a request without a session cookie.
var ErrNoSession = errors.New("no console session")

// ErrCrossSite is a request with a session cookie that is not the
// console's own page calling (no console header, or another origin).
var ErrCrossSite = errors.New("a session cookie is accepted only from the console's own page (same origin, with its request header)")
