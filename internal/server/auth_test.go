package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"fmgr.dev/internal/authn"
)

const procWho = "/flyteidl2.auth.IdentityService/UserInfo"
const procAnon = "/flyteidl2.auth.AuthMetadataService/GetPublicClientConfig"

type fakeVerifier map[string]authn.Principal

func (f fakeVerifier) Verify(_ context.Context, tok string) (authn.Principal, error) {
	if tok == "db-down" {
		return authn.Principal{}, errors.New("sql: database is closed, password=hunter2")
	}
	p, ok := f[tok]
	if !ok {
		return authn.Principal{}, authn.ErrBadCredential
	}
	return p, nil
}

func whoHandlers(s *Server) {
	who := func(ctx context.Context, _ *connect.Request[wrapperspb.StringValue]) (*connect.Response[wrapperspb.StringValue], error) {
		p, _ := authn.FromContext(ctx)
		return connect.NewResponse(wrapperspb.String(p.Subject)), nil
	}
	_ = s.Mount(Service{Path: "/flyteidl2.auth.IdentityService/", Handler: connect.NewUnaryHandler(procWho, who, s.HandlerOptions()...)})
	_ = s.Mount(Service{Path: "/flyteidl2.auth.AuthMetadataService/", Handler: connect.NewUnaryHandler(procAnon, who, s.HandlerOptions()...)})
}

// With auth required, every procedure but the anonymous ones answers
// UNAUTHENTICATED without a valid credential, unary and streams alike, on
// every protocol; a valid one reaches the handler with its principal.
func TestAuthRequired(t *testing.T) {
	ts := startServer(t, nil, func(s *Server) {
		whoHandlers(s)
		s.RequireAuth(Auth{Verifier: fakeVerifier{
			"good":    {Subject: "apikey:k1", Kind: authn.KindAPIKey, Bindings: []authn.Binding{{Role: "viewer", Project: "*", Domain: "*"}}},
			"no-role": {Subject: "apikey:k2", Kind: authn.KindAPIKey},
		}})
	})
	call := func(tr transport, proc, header string) (string, error) {
		c := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](httpClient(tr.h2c), ts.base+proc, tr.protos...)
		req := connect.NewRequest(wrapperspb.String("x"))
		if header != "" {
			req.Header().Set("Authorization", header)
		}
		resp, err := c.CallUnary(context.Background(), req)
		if err != nil {
			return "", err
		}
		return resp.Msg.GetValue(), nil
	}
	for _, tr := range transports {
		for _, tc := range []struct {
			name, proc, header string
			code               connect.Code // 0: ok
			want               string
		}{
			{"none", procWho, "", connect.CodeUnauthenticated, ""},
			{"not bearer", procWho, "Basic Zm9vOmJhcg==", connect.CodeUnauthenticated, ""},
			{"unknown", procWho, "Bearer nope", connect.CodeUnauthenticated, ""},
			{"verifier down", procWho, "Bearer db-down", connect.CodeUnavailable, ""},
			{"good", procWho, "Bearer good", 0, "apikey:k1"},
			{"good lower-case scheme", procWho, "bearer good", 0, "apikey:k1"},
			{"anonymous procedure", procAnon, "", 0, ""},
			{"no role", procWho, "Bearer no-role", connect.CodePermissionDenied, ""},
		} {
			got, err := call(tr, tc.proc, tc.header)
			if connect.CodeOf(err) != tc.code && !(tc.code == 0 && err == nil) {
				t.Errorf("%s %s: err %v, want code %v", tr.name, tc.name, err, tc.code)
				continue
			}
			if err != nil && connect.CodeOf(err) == connect.CodePermissionDenied &&
				(strings.Contains(strings.ToLower(err.Error()), "unauthorized") || strings.Contains(strings.ToLower(err.Error()), "unauthenticated")) {
				t.Errorf("%s %s: a denial the SDK would take for a stale credential: %v", tr.name, tc.name, err)
			}
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Errorf("%s %s: internal detail leaked: %v", tr.name, tc.name, err)
			}
			if err == nil && got != tc.want {
				t.Errorf("%s %s: principal %q, want %q", tr.name, tc.name, got, tc.want)
			}
		}
	}
	// Server streams are checked before the handler runs.
	stream, err := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](httpClient(false), ts.base+procTick).
		CallServerStream(context.Background(), connect.NewRequest(wrapperspb.String("1ms")))
	if err != nil {
		t.Fatal(err)
	}
	if stream.Receive() {
		t.Error("a stream without a credential got a message")
	}
	if connect.CodeOf(stream.Err()) != connect.CodeUnauthenticated {
		t.Errorf("stream without a credential: %v", stream.Err())
	}
	stream.Close()
	// Plain routes are not Connect procedures; health stays open.
	r, err := http.Get(ts.base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusOK {
		t.Errorf("/healthz: %d", r.StatusCode)
	}
}

// Auth off (the default) lets every call through without a principal.
func TestAuthOffByDefault(t *testing.T) {
	ts := startServer(t, nil, whoHandlers)
	if ts.AuthRequired() {
		t.Fatal("auth required by default")
	}
	c := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](httpClient(false), ts.base+procWho)
	resp, err := c.CallUnary(context.Background(), connect.NewRequest(wrapperspb.String("x")))
	if err != nil || resp.Msg.GetValue() != "" {
		t.Fatalf("auth off: %v %v", resp, err)
	}
}
