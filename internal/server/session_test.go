package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/dataproxy"
	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/config"
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

func (f fakeSessions) VerifyRead(ctx context.Context, h http.Header) (authn.Principal, error) {
	return f.VerifySession(ctx, h)
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

// A plain GET route that shows a procedure's answer (the log page) is
// authenticated and authorized as the procedure: nothing without a
// credential, a bearer or the session, and only on the projects the
// caller's roles allow.
func TestAuthorizeRead(t *testing.T) {
	s := New(config.Server{}, nil)
	const proc = "/flyteidl2.dataproxy.DataProxyService/TailLogs"
	msg := &dataproxy.TailLogsRequest{ActionId: &common.ActionIdentifier{Run: &common.RunIdentifier{Project: "p", Domain: "d", Name: "r"}, Name: "a0"}}
	req := func(cookie, bearer string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/logs/x", nil)
		if cookie != "" {
			r.Header.Set("Cookie", "s="+cookie)
		}
		if bearer != "" {
			r.Header.Set("Authorization", "Bearer "+bearer)
		}
		return r
	}
	if _, err := s.AuthorizeRead(req("", ""), proc, msg); err != nil {
		t.Fatalf("auth off: %v", err)
	}
	s.RequireAuth(Auth{Verifier: fakeVerifier{
		"tok":   {Subject: "apikey:k1", Kind: authn.KindAPIKey, Bindings: []authn.Binding{{Role: "viewer", Project: "p", Domain: "*"}}},
		"other": {Subject: "apikey:k2", Kind: authn.KindAPIKey, Bindings: []authn.Binding{{Role: "admin", Project: "q", Domain: "*"}}},
	}, Session: fakeSessions{}})
	for _, tc := range []struct {
		name, cookie, bearer string
		code                 connect.Code
	}{
		{"nothing", "", "", connect.CodeUnauthenticated},
		{"bearer", "", "tok", 0},
		{"bearer of another project", "", "other", connect.CodePermissionDenied},
		{"bad bearer", "", "nope", connect.CodeUnauthenticated},
		{"session", "good", "", 0},
		{"forged session", "forged", "", connect.CodeUnauthenticated},
		{"cross-site", "cross", "", connect.CodePermissionDenied},
	} {
		ctx, err := s.AuthorizeRead(req(tc.cookie, tc.bearer), proc, msg)
		if connect.CodeOf(err) != tc.code && !(tc.code == 0 && err == nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.code)
			continue
		}
		if _, ok := authn.FromContext(ctx); err == nil && !ok {
			t.Errorf("%s: no principal in the context", tc.name)
		}
	}
}
