package apikey

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"fmgr.dev/internal/authn"
)

// TokenPath is the token endpoint's path (advertised by
// AuthMetadataService.GetOAuth2Metadata).
const TokenPath = "/oauth2/token"

// DeriveSigningKey derives the token signing key from the manager's
// signing key (storage.signingKey), separated from its other uses.
func DeriveSigningKey(managerKey string) []byte {
	m := hmac.New(sha256.New, []byte(managerKey))
	m.Write([]byte("flyte-manager auth token v1"))
	return m.Sum(nil)
}

// maxTokenRequest bounds a token request's form.
const maxTokenRequest = 16 << 10

// TokenHandler serves POST /oauth2/token: the client_credentials grant
// (RFC 6749 §4.4) with the key id and secret in HTTP Basic (or the
// client_id and client_secret form fields), answering a bearer token.
func (i *Issuer) TokenHandler(log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxTokenRequest)
		if err := r.ParseForm(); err != nil {
			oauthError(w, http.StatusBadRequest, "invalid_request", "the body must be an application/x-www-form-urlencoded form")
			return
		}
		if gt := r.PostForm.Get("grant_type"); gt != "client_credentials" {
			oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "only grant_type=client_credentials is supported (an API key's id and secret)")
			return
		}
		id, secret, ok := r.BasicAuth()
		if ok {
			// RFC 6749 §2.3.1: both are form-urlencoded inside Basic.
			id, _ = url.QueryUnescape(id)
			secret, _ = url.QueryUnescape(secret)
		} else {
			id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		}
		if id == "" || secret == "" {
			w.Header().Set("WWW-Authenticate", `Basic realm="flyte-manager"`)
			oauthError(w, http.StatusUnauthorized, "invalid_client", "send the API key's id and secret with HTTP Basic")
			return
		}
		token, ttl, err := i.Exchange(r.Context(), id, secret)
		if errors.Is(err, authn.ErrBadCredential) {
			w.Header().Set("WWW-Authenticate", `Basic realm="flyte-manager"`)
			oauthError(w, http.StatusUnauthorized, "invalid_client", "unknown or revoked API key")
			return
		}
		if err != nil {
			if log != nil {
				log.WarnContext(r.Context(), "token endpoint failed", "error", err)
			}
			oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "could not check the key now; retry")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"access_token": token,
			"token_type":   "Bearer",
			"expires_in":   int64(ttl / time.Second),
		})
	})
}

func oauthError(w http.ResponseWriter, status int, code, desc string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc})
}
