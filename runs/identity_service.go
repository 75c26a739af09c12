package runs

import (
	"context"
	"errors"
	"net/http"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/auth"
	"fmgr.dev/gen/go/flyteidl2/auth/authconnect"
	"fmgr.dev/internal/ident"
)

// The identity every caller has while the manager runs without
// authentication (see ident.AnonymousSubject).
const (
	AnonymousSubject = ident.AnonymousSubject
	AnonymousName    = "Anonymous"
)

// IdentityService implements flyteidl2.auth.IdentityService for a manager
// without authentication: every caller is the same anonymous user.
type IdentityService struct{}

var _ authconnect.IdentityServiceHandler = (*IdentityService)(nil)

// NewIdentityService returns the IdentityService.
func NewIdentityService() *IdentityService { return &IdentityService{} }

// Handler returns the service's Connect handler and the path to mount it on.
func (s *IdentityService) Handler(opts ...connect.HandlerOption) (string, http.Handler) {
	return authconnect.NewIdentityServiceHandler(s, opts...)
}

// UserInfo answers the stable anonymous identity.
func (s *IdentityService) UserInfo(context.Context, *connect.Request[auth.UserInfoRequest]) (*connect.Response[auth.UserInfoResponse], error) {
	return connect.NewResponse(&auth.UserInfoResponse{
		Subject:           AnonymousSubject,
		Name:              AnonymousName,
		PreferredUsername: AnonymousSubject,
	}), nil
}

// AuthMetadataService implements flyteidl2.auth.AuthMetadataService for a
// manager without an authorization server. SDKs connecting with
// insecure=True never call it; SDKs using TLS only call it after an
// UNAUTHENTICATED answer, which this manager never gives.
type AuthMetadataService struct{}

var _ authconnect.AuthMetadataServiceHandler = (*AuthMetadataService)(nil)

// NewAuthMetadataService returns the AuthMetadataService.
func NewAuthMetadataService() *AuthMetadataService { return &AuthMetadataService{} }

// Handler returns the service's Connect handler and the path to mount it on.
func (s *AuthMetadataService) Handler(opts ...connect.HandlerOption) (string, http.Handler) {
	return authconnect.NewAuthMetadataServiceHandler(s, opts...)
}

var errNoAuth = connect.NewError(connect.CodeUnimplemented,
	errors.New("authentication is not configured on this flyte-manager: there is no authorization server; "+
		"connect without credentials (e.g. flyte.init(..., insecure=True) for a plain-HTTP endpoint)"))

// GetOAuth2Metadata reports that no authorization server is configured.
func (s *AuthMetadataService) GetOAuth2Metadata(context.Context, *connect.Request[auth.GetOAuth2MetadataRequest]) (*connect.Response[auth.GetOAuth2MetadataResponse], error) {
	return nil, errNoAuth
}

// GetPublicClientConfig reports that no authorization server is configured.
func (s *AuthMetadataService) GetPublicClientConfig(context.Context, *connect.Request[auth.GetPublicClientConfigRequest]) (*connect.Response[auth.GetPublicClientConfigResponse], error) {
	return nil, errNoAuth
}

// IdentityServices bundles the IdentityService and the AuthMetadataService,
// the two services of a manager without authentication.
type IdentityServices struct {
	Identity     *IdentityService
	AuthMetadata *AuthMetadataService
}

// NewIdentityServices returns both identity services.
func NewIdentityServices() *IdentityServices {
	return &IdentityServices{Identity: NewIdentityService(), AuthMetadata: NewAuthMetadataService()}
}

// Handlers returns both services' Connect handlers by mount path.
func (s *IdentityServices) Handlers(opts ...connect.HandlerOption) map[string]http.Handler {
	out := map[string]http.Handler{}
	for _, mount := range []func(...connect.HandlerOption) (string, http.Handler){s.Identity.Handler, s.AuthMetadata.Handler} {
		path, h := mount(opts...)
		out[path] = h
	}
	return out
}
