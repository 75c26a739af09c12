package consoleauth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"fmgr.dev/internal/requrl"
)

// flowCookie holds a provider sign-in in progress, sealed, for the
// callback: the state it must come back with, the nonce the ID token must
// carry, the PKCE verifier, and the page to return to.
const flowCookie = "flyte_console_signin"

const (
	flowPurpose = "signin"
	flowTTL     = 10 * time.Minute
	maxTokenAns = 1 << 20
)

type flow struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Next     string `json:"x"`
	Exp      int64  `json:"e"`
}

// redirectURI is the callback's absolute URL as the browser reaches the
// manager.
func redirectURI(ctx context.Context) string {
	return strings.TrimRight(requrl.BaseURL(ctx), "/") + CallbackPath
}

// serveLogin sends the browser to the provider's authorization endpoint
// (the authorization code flow with PKCE S256, a state and a nonce).
func (s *Sessions) serveLogin(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Users == nil {
		http.Error(w, "this manager has no identity provider (auth.oidc): sign in with an API key", http.StatusNotFound)
		return
	}
	ep, err := s.cfg.Users.Discovery().Endpoints(r.Context())
	if err != nil || ep.Authorization == "" {
		s.cfg.Log.WarnContext(r.Context(), "console sign-in: the identity provider has no usable authorization endpoint", "error", err)
		signInFailed(w, http.StatusBadGateway, "The identity provider cannot be reached now. Try again in a moment.")
		return
	}
	f := flow{State: randomString(24), Nonce: randomString(24), Verifier: randomString(48),
		Next: safeNext(r.URL.Query().Get("next")), Exp: time.Now().Add(flowTTL).Unix()}
	sealed, err := s.seal.seal(flowPurpose, f)
	if err != nil {
		http.Error(w, "could not start the sign-in", http.StatusInternalServerError)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: flowCookie, Value: sealed, Path: Prefix, MaxAge: int(flowTTL.Seconds()),
		HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteLaxMode})
	sum := sha256.Sum256([]byte(f.Verifier))
	scopes := s.cfg.Scopes
	if !slices.Contains(scopes, "openid") {
		scopes = append([]string{"openid"}, scopes...)
	}
	q := url.Values{
		"response_type":         {"code"},
		"client_id":             {s.cfg.ClientID},
		"redirect_uri":          {redirectURI(r.Context())},
		"scope":                 {strings.Join(scopes, " ")},
		"state":                 {f.State},
		"nonce":                 {f.Nonce},
		"code_challenge":        {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"},
	}
	target := ep.Authorization
	if strings.Contains(target, "?") {
		target += "&" + q.Encode()
	} else {
		target += "?" + q.Encode()
	}
	http.Redirect(w, r, target, http.StatusFound)
}

// serveCallback finishes the sign-in: the state must be the flow's, the
// code is exchanged (with the PKCE verifier, and the client secret of a
// confidential client), and the ID token verified (signature, audience,
// expiry, nonce) before the session starts.
func (s *Sessions) serveCallback(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Users == nil {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	c, err := r.Cookie(flowCookie)
	var f flow
	if err != nil || s.seal.open(flowPurpose, c.Value, &f) != nil || time.Now().Unix() >= f.Exp {
		signInFailed(w, http.StatusBadRequest, "This sign-in was not started here or took too long. Start again.")
		return
	}
	clearCookie(w, r, flowCookie, Prefix)
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(f.State)) != 1 {
		signInFailed(w, http.StatusBadRequest, "The provider answered for another sign-in. Start again.")
		return
	}
	if e := q.Get("error"); e != "" {
		signInFailed(w, http.StatusUnauthorized, "The identity provider did not sign you in ("+e+").")
		return
	}
	raw, err := s.exchange(r.Context(), q.Get("code"), f.Verifier)
	if err != nil {
		s.cfg.Log.WarnContext(r.Context(), "console sign-in: the code exchange failed", "error", err)
		signInFailed(w, http.StatusBadGateway, "The identity provider refused the sign-in. Start again.")
		return
	}
	id, err := s.cfg.Users.VerifyIDToken(r.Context(), raw, s.cfg.ClientID, f.Nonce)
	if err != nil {
		s.cfg.Log.WarnContext(r.Context(), "console sign-in: the ID token is not valid", "error", err)
		signInFailed(w, http.StatusUnauthorized, "The identity provider's answer could not be verified. Start again.")
		return
	}
	if !s.startSession(w, r, "", &id) {
		return
	}
	http.Redirect(w, r, f.Next, http.StatusSeeOther)
}

// exchange trades code for the provider's ID token.
func (s *Sessions) exchange(ctx context.Context, code, verifier string) (string, error) {
	if code == "" {
		return "", fmt.Errorf("the callback carries no code")
	}
	ep, err := s.cfg.Users.Discovery().Endpoints(ctx)
	if err != nil {
		return "", err
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI(ctx)},
		"code_verifier": {verifier}, "client_id": {s.cfg.ClientID}}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.Token, strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if s.cfg.ClientSecret != "" { // RFC 6749 §2.3.1: both parts form-encoded
		req.SetBasicAuth(url.QueryEscape(s.cfg.ClientID), url.QueryEscape(s.cfg.ClientSecret))
	}
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var ans struct {
		IDToken string `json:"id_token"`
		Error   string `json:"error"`
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenAns))
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(body, &ans); err != nil || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("token endpoint answered %s (error %q)", resp.Status, ans.Error)
	}
	return ans.IDToken, nil
}

// signInFailed is a small page that says what went wrong and links back.
func signInFailed(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; base-uri 'none'; frame-ancestors 'none'")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<!doctype html><title>Sign-in failed</title><p>%s</p><p><a href=\"%s\">Back to the console</a></p>\n", html.EscapeString(msg), consoleHome)
}
