package runs

import (
	"context"
	"errors"
	"log/slog"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/auth"
)

// providerMetadata is the OAuth2 metadata with an identity provider
// (auth.oidc): the SDK's Pkce opens the provider's authorization endpoint
// and its DeviceFlow asks the provider's device endpoint, while the token
// endpoint stays the manager's, which keeps API keys' client_credentials
// and forwards every other request (the provider's machine clients'
// client_credentials, the interactive grants) to the provider
// (internal/oidcauth.TokenEndpoint): the SDK reads one token endpoint for
// every flow.
func (s *AuthMetadataService) providerMetadata(ctx context.Context, base string) (*connect.Response[auth.GetOAuth2MetadataResponse], error) {
	doc, err := s.idp.Endpoints(ctx)
	if err != nil {
		slog.WarnContext(ctx, "GetOAuth2Metadata: identity provider discovery failed", "error", err)
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("the identity provider cannot be reached now; retry"))
	}
	grants := []string{"client_credentials", "authorization_code", "refresh_token"}
	if doc.Device != "" {
		grants = append(grants, "urn:ietf:params:oauth:grant-type:device_code")
	}
	return connect.NewResponse(&auth.GetOAuth2MetadataResponse{
		Issuer:                            doc.Issuer,
		AuthorizationEndpoint:             doc.Authorization,
		TokenEndpoint:                     base + TokenPath,
		DeviceAuthorizationEndpoint:       doc.Device,
		JwksUri:                           doc.JWKS,
		GrantTypesSupported:               grants,
		ResponseTypesSupported:            []string{"code"},
		CodeChallengeMethodsSupported:     []string{"S256"},
		TokenEndpointAuthMethodsSupported: []string{"client_secret_basic", "none"},
		ScopesSupported:                   s.cfg.OIDC.Scopes,
	}), nil
}

// providerClientConfig is the provider's public client for the SDK's
// interactive flows.
func (s *AuthMetadataService) providerClientConfig() *connect.Response[auth.GetPublicClientConfigResponse] {
	return connect.NewResponse(&auth.GetPublicClientConfigResponse{
		ClientId:                 s.cfg.OIDC.ClientID,
		RedirectUri:              s.cfg.RedirectURI,
		Scopes:                   s.cfg.OIDC.Scopes,
		AuthorizationMetadataKey: s.cfg.AuthorizationMetadataKey,
		Audience:                 s.cfg.OIDC.Audience,
	})
}
