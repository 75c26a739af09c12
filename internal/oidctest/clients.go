package oidctest

import (
	"net/http"
	"net/url"
)

// Client is a confidential (machine) client of the provider: the
// client_credentials grant with its id and secret issues a token whose
// "sub" is Subject (the client id when empty, as Okta and Auth0 do;
// Keycloak uses a service account's id) and whose "client_id" claim (RFC
// 9068) is the client id.
type Client struct {
	ID      string
	Secret  string
	Subject string
	// Audience overrides the tokens' "aud" (the issuer's Audience when
	// empty).
	Audience string
}

// AddClient registers c.
func (i *Issuer) AddClient(c Client) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.clients == nil {
		i.clients = map[string]Client{}
	}
	i.clients[c.ID] = c
}

// clientCredentials serves the client_credentials grant (RFC 6749 §4.4):
// the id and secret in HTTP Basic (form-urlencoded inside, §2.3.1) or the
// client_id and client_secret fields.
func (i *Issuer) clientCredentials(w http.ResponseWriter, r *http.Request) {
	id, secret, ok := r.BasicAuth()
	if ok {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostFormValue("client_id"), r.PostFormValue("client_secret")
	}
	i.mu.Lock()
	c, known := i.clients[id]
	i.mu.Unlock()
	if !known || secret == "" || secret != c.Secret {
		writeJSON(w, http.StatusUnauthorized, oauthErr("invalid_client", "unknown client or wrong secret"))
		return
	}
	sub := c.Subject
	if sub == "" {
		sub = c.ID
	}
	claims := i.Claims(sub)
	claims["client_id"] = c.ID
	claims["azp"] = c.ID
	if c.Audience != "" {
		claims["aud"] = c.Audience
	}
	if s := r.PostFormValue("scope"); s != "" {
		claims["scope"] = s
	}
	i.mu.Lock()
	i.seen["client_credentials"]++
	i.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"access_token": i.Sign(claims), "token_type": "Bearer", "expires_in": 3600})
}
