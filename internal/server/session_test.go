package server

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"fmgr.dev/internal/authn"
)

// fakeSessions reads the "s" cookie: "good" is a viewer, "cross" is a
// cross-site request, "db-down" cannot be checked, others are bad.
type fakeSessions struct{}

func (fakeSessions) VerifySession(_ context.Context, h http.Header) (authn.Principal, error) {
	c, err := (&http.Request{Header: h}).Cookie("s")
	switch {
	case err != nil:
		return authn.Principal{}, authn.ErrNoSession
	case c.Value == "good":
		return authn.Principal{Subject: "user:alice", Kind: authn.KindUser, Bindings: []authn.Binding{{Role: "viewer", Project: "*", Domain: "*"}}}, nil
	case c.Value == "cross":
		return authn.Principal{}, authn.ErrCrossSite
	case c.Value == "db-down":
		return authn.Principal{}, errors.New("sql: database is closed")
	}
	return authn.Principal{}, authn.ErrBadCredential
}

// A request without a bearer credential is authenticated by the console's
// session when there is one: a bad session is UNAUTHENTICATED, a
// cross-site use PERMISSION_DENIED; a bearer credential wins over the
// cookie.
func TestAuthConsoleSession(t *testing.T) {
	ts := startServer(t, nil, func(s *Server) {
		whoHandlers(s)
		s.RequireAuth(Auth{Verifier: fakeVerifier{"tok": {Subject: "apikey:k1", Kind: authn.KindAPIKey,
			Bindings: []authn.Binding{{Role: "viewer", Project: "*", Domain: "*"}}}}, Session: fakeSessions{}})
	})
	tr := transports[0]
	for _, tc := range []struct {
		name, cookie, bearer string
		code                 connect.Code
		want                 string
	}{
		{"no cookie", "", "", connect.CodeUnauthenticated, ""},
		{"session", "good", "", 0, "user:alice"},
		{"forged", "forged", "", connect.CodeUnauthenticated, ""},
		{"cross-site", "cross", "", connect.CodePermissionDenied, ""},
		{"unavailable", "db-down", "", connect.CodeUnavailable, ""},
		{"bearer wins", "forged", "tok", 0, "apikey:k1"},
	} {
		c := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](httpClient(tr.h2c), ts.base+procWho, tr.protos...)
		req := connect.NewRequest(wrapperspb.String("x"))
		if tc.cookie != "" {
			req.Header().Set("Cookie", "s="+tc.cookie)
		}
		if tc.bearer != "" {
			req.Header().Set("Authorization", "Bearer "+tc.bearer)
		}
		resp, err := c.CallUnary(context.Background(), req)
		if connect.CodeOf(err) != tc.code && !(tc.code == 0 && err == nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.code)
			continue
		}
		if err == nil && resp.Msg.GetValue() != tc.want {
			t.Errorf("%s: subject %q, want %q", tc.name, resp.Msg.GetValue(), tc.want)
		}
	}
}
