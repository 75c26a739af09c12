// Package authn is who a caller is: the principal an authenticated request
// carries in its context, the verifier the server's auth interceptor asks,
// and the procedures anyone may call. The interceptor itself is in
// internal/server (auth.go); API keys and tokens are in internal/apikey.
package authn

import (
	"context"
	"errors"
	"strings"
)

// Kinds of principal.
const (
	KindAPIKey = "api-key" // a key from `flyte-manager apikey create`, or a token minted from one
	KindTask   = "task"    // an attempt's credential, scoped to its run
)

// Principal is an authenticated caller.
type Principal struct {
	// Subject is its stable id ("apikey:<id>", "task:<project>/<domain>/<run>").
	Subject string
	// Name is what people see (the key's name).
	Name string
	Kind string
	// Bindings are its roles (internal/authz).
	Bindings []Binding
	// Run is the run a KindTask principal belongs to (its credential
	// allows calls about that run only); zero for other kinds.
	Run RunScope
}

// RunScope names one run.
type RunScope struct {
	Org     string
	Project string
	Domain  string
	Run     string
}

// Binding is a role on a project and domain ("*" for any).
type Binding struct {
	Role    string
	Project string
	Domain  string
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext is the caller of ctx; ok is false when the request was not
// authenticated (auth off, or an anonymous procedure).
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// Verifier turns a bearer credential into a principal.
type Verifier interface {
	// Verify returns ErrBadCredential (possibly wrapped) for a credential
	// that is unknown, expired or revoked; any other error is internal.
	Verify(ctx context.Context, credential string) (Principal, error)
}

// ErrBadCredential is a credential that does not authenticate anyone.
var ErrBadCredential = errors.New("the credential is not valid (unknown, expired or revoked)")

// anonymousServices are the services every caller may use without a
// credential: the SDK's discovery calls them anonymously before it has one
// (flyteidl2/auth/auth_service.proto says they must be).
var anonymousServices = []string{
	"/flyteidl2.auth.AuthMetadataService/",
	"/grpc.health.v1.Health/",
}

// Anonymous reports whether procedure ("/pkg.Service/Method") needs no
// credential.
func Anonymous(procedure string) bool {
	for _, s := range anonymousServices {
		if strings.HasPrefix(procedure, s) {
			return true
		}
	}
	return false
}

// Bearer extracts the token of an "Authorization: Bearer <token>" value
// (the scheme case-insensitive); "" when there is none.
func Bearer(value string) string {
	scheme, token, ok := strings.Cut(strings.TrimSpace(value), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// Subject is the subject of ctx's caller, "" when the request was not
// authenticated (what deployed_by and similar fields record).
func Subject(ctx context.Context) string {
	p, _ := FromContext(ctx)
	return p.Subject
}
