package oidcauth

import (
	"net/http"
	"net/url"
)

// isLocal reports whether a token request is the manager's to answer: a
// client_credentials grant whose client id (HTTP Basic, RFC 6749 §2.3.1,
// else the client_id field) localClient claims, or one that names no
// client at all (local answers invalid_client). The provider's machine
// clients have ids of the provider's choosing, which localClient does not
// claim, so their requests go on to the provider.
func isLocal(r *http.Request, form url.Values, localClient func(string) bool) bool {
	if form.Get("grant_type") != "client_credentials" {
		return false
	}
	id, _, ok := r.BasicAuth()
	if ok {
		id, _ = url.QueryUnescape(id)
	} else {
		id = form.Get("client_id")
	}
	return id == "" || localClient == nil || localClient(id)
}
