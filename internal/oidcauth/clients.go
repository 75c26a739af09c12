package oidcauth

// clientOf is the client a token was issued to: RFC 9068's "client_id",
// else "azp" (Keycloak, Auth0), else Okta's "cid". A binding naming a
// client (auth.bindings[].client) matches every token of that client, so
// it is meant for the provider's confidential machine clients, which get
// tokens only with their secret (the client_credentials grant); the
// configuration refuses a binding on auth.oidc.clientId, the public client
// people sign in with.
func clientOf(claims map[string]any) string {
	for _, c := range []string{"client_id", "azp", "cid"} {
		if s, ok := claims[c].(string); ok && s != "" {
			return s
		}
	}
	return ""
}
