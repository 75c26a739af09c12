package runs

import (
	"context"
	"errors"
	"net/http"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"

	"fmgr.dev/gen/go/flyteidl2/auth"
	"fmgr.dev/gen/go/flyteidl2/auth/authconnect"
	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/ident"
	"fmgr.dev/internal/oidcauth"
	"fmgr.dev/internal/requrl"
)

// The identity every caller has while the manager runs without
// authentication (see ident.AnonymousSubject).
const (
	AnonymousSubject = ident.AnonymousSubject
	AnonymousName    = "Anonymous"
)

// IdentityService implements flyteidl2.auth.IdentityService: the caller's
// principal with auth required, else the same anonymous user for everyone.
type IdentityService struct{}

var _ authconnect.IdentityServiceHandler = (*IdentityService)(nil)

// NewIdentityService returns the IdentityService.
func NewIdentityService() *IdentityService { return &IdentityService{} }

// Handler returns the service's Connect handler and the path to mount it on.
func (s *IdentityService) Handler(opts ...connect.HandlerOption) (string, http.Handler) {
	return authconnect.NewIdentityServiceHandler(s, opts...)
}

// UserInfo answers the caller, or the stable anonymous identity.
func (s *IdentityService) UserInfo(ctx context.Context, _ *connect.Request[auth.UserInfoRequest]) (*connect.Response[auth.UserInfoResponse], error) {
	if p, ok := authn.FromContext(ctx); ok {
		return connect.NewResponse(&auth.UserInfoResponse{
			Subject:           p.Subject,
			Name:              p.Name,
			PreferredUsername: p.Name,
			AdditionalClaims:  claims(map[string]any{"kind": p.Kind}),
		}), nil
	}
	return connect.NewResponse(&auth.UserInfoResponse{
		Subject:           AnonymousSubject,
		Name:              AnonymousName,
		PreferredUsername: AnonymousSubject,
	}), nil
}

// AuthMetadataService implements flyteidl2.auth.AuthMetadataService from
// the auth configuration. With auth off it answers Unimplemented: SDKs
// connecting with insecure=True never call it, and SDKs using TLS only
// call it after an UNAUTHENTICATED answer, which is then never given. With
// auth required it advertises the manager's own token endpoint
// (/oauth2/token, client_credentials with HTTP Basic: the SDK's
// ClientSecret flow and FLYTE_API_KEY).
type AuthMetadataService struct {
	cfg config.Auth
	idp *oidcauth.Discovery // auth.oidc's provider; nil without one (auth_metadata_oidc.go)
}

var _ authconnect.AuthMetadataServiceHandler = (*AuthMetadataService)(nil)

// NewAuthMetadataService returns the AuthMetadataService for cfg.
func NewAuthMetadataService(cfg config.Auth) *AuthMetadataService {
	s := &AuthMetadataService{cfg: cfg}
	if cfg.OIDC.Enabled() {
		s.idp = oidcauth.NewDiscovery(cfg.OIDC.Issuer, nil)
	}
	return s
}

// Handler returns the service's Connect handler and the path to mount it on.
func (s *AuthMetadataService) Handler(opts ...connect.HandlerOption) (string, http.Handler) {
	return authconnect.NewAuthMetadataServiceHandler(s, opts...)
}

var errNoAuth = connect.NewError(connect.CodeUnimplemented,
	errors.New("authentication is not configured on this flyte-manager: there is no authorization server; "+
		"connect without credentials (e.g. flyte.init(..., insecure=True) for a plain-HTTP endpoint)"))

// TokenPath is where the manager's token endpoint is served.
const TokenPath = "/oauth2/token" // apikey.TokenPath; services do not import each other

// GetOAuth2Metadata describes the manager's token endpoint, at the base
// URL the client used (or server.externalURL).
func (s *AuthMetadataService) GetOAuth2Metadata(ctx context.Context, _ *connect.Request[auth.GetOAuth2MetadataRequest]) (*connect.Response[auth.GetOAuth2MetadataResponse], error) {
	if !s.cfg.Required() {
		return nil, errNoAuth
	}
	base := requrl.BaseURL(ctx)
	if s.idp != nil {
		return s.providerMetadata(ctx, base)
	}
	return connect.NewResponse(&auth.GetOAuth2MetadataResponse{
		Issuer:                            base,
		TokenEndpoint:                     base + TokenPath,
		GrantTypesSupported:               []string{"client_credentials"},
		TokenEndpointAuthMethodsSupported: []string{"client_secret_basic"},
		ScopesSupported:                   s.cfg.Scopes,
		ResponseTypesSupported:            []string{"token"},
	}), nil
}

// GetPublicClientConfig answers the configured public client settings.
func (s *AuthMetadataService) GetPublicClientConfig(context.Context, *connect.Request[auth.GetPublicClientConfigRequest]) (*connect.Response[auth.GetPublicClientConfigResponse], error) {
	if !s.cfg.Required() {
		return nil, errNoAuth
	}
	if s.idp != nil {
		return s.providerClientConfig(), nil
	}
	return connect.NewResponse(&auth.GetPublicClientConfigResponse{
		ClientId:                 s.cfg.ClientID,
		RedirectUri:              s.cfg.RedirectURI,
		Scopes:                   s.cfg.Scopes,
		AuthorizationMetadataKey: s.cfg.AuthorizationMetadataKey,
		Audience:                 s.cfg.Audience,
	}), nil
}

// IdentityServices bundles the IdentityService and the AuthMetadataService,
// the two services of a manager without authentication.
type IdentityServices struct {
	Identity     *IdentityService
	AuthMetadata *AuthMetadataService
}

// NewIdentityServices returns both identity services for cfg.
func NewIdentityServices(cfg config.Auth) *IdentityServices {
	return &IdentityServices{Identity: NewIdentityService(), AuthMetadata: NewAuthMetadataService(cfg)}
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

// claims is m as a Struct for UserInfoResponse.additional_claims.
func claims(m map[string]any) *structpb.Struct {
	st, err := structpb.NewStruct(m)
	if err != nil {
		return nil
	}
	return st
}
