package oidcauth

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"
)

// maxTokenForm bounds a token request's body.
const maxTokenForm = 16 << 10

// TokenEndpoint serves the manager's token endpoint when a provider is
// configured: client_credentials for a client id localClient claims (an
// API key's id) goes to local; every other request (the provider's own
// machine clients' client_credentials, and the SDK's authorization_code,
// device_code and refresh_token) is forwarded unchanged to the provider's
// token endpoint, and its answer returned unchanged. So one advertised
// token endpoint serves FLYTE_API_KEY, ClientSecret (API keys and the
// provider's clients), Pkce and DeviceFlow; an API key's secret never
// reaches the provider.
func TokenEndpoint(local http.Handler, localClient func(clientID string) bool, disc *Discovery, client *http.Client, log *slog.Logger) http.Handler {
	if client == nil {
		client = http.DefaultClient
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxTokenForm))
		if err != nil {
			tokenError(w, http.StatusBadRequest, "invalid_request", "the token request is too large or unreadable")
			return
		}
		form, err := url.ParseQuery(string(body))
		if err != nil || form.Get("grant_type") == "" || isLocal(r, form, localClient) {
			r.Body = io.NopCloser(bytes.NewReader(body))
			local.ServeHTTP(w, r)
			return
		}
		doc, err := disc.Endpoints(r.Context())
		if err != nil {
			log.WarnContext(r.Context(), "token endpoint: identity provider unavailable", "error", err)
			tokenError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the identity provider cannot be reached now; retry")
			return
		}
		forward(w, r, doc.Token, body, client, log)
	})
}

func forward(w http.ResponseWriter, r *http.Request, endpoint string, body []byte, client *http.Client, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		tokenError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the identity provider cannot be reached now; retry")
		return
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if a := r.Header.Get("Authorization"); a != "" {
		req.Header.Set("Authorization", a) // a confidential client's Basic credentials
	}
	resp, err := client.Do(req)
	if err != nil {
		log.WarnContext(r.Context(), "token endpoint: forwarding to the identity provider failed", "error", err)
		tokenError(w, http.StatusBadGateway, "temporarily_unavailable", "the identity provider cannot be reached now; retry")
		return
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument))
	if err != nil {
		tokenError(w, http.StatusBadGateway, "temporarily_unavailable", "the identity provider's answer could not be read; retry")
		return
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(out)
}

func tokenError(w http.ResponseWriter, status int, code, desc string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc})
}
