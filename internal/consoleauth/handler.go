package consoleauth

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/oidcauth"
	"fmgr.dev/internal/requrl"
)

// Prefix is where the sign-in routes live.
const Prefix = "/console/auth/"

// CallbackPath is the redirect URI's path the provider sends people back
// to; register <the manager's URL>/console/auth/callback at the provider.
const CallbackPath = Prefix + "callback"

// consoleHome is where a sign-in ends when it names no page.
const consoleHome = "/v2/"

// maxSignInBody bounds a pasted key's request.
const maxSignInBody = 8 << 10

// Handler serves the sign-in routes under Prefix:
//
//	GET  session   who is signed in (200) or how to sign in (401)
//	GET  login     starts the provider's sign-in (?next=/v2/... to return to)
//	GET  callback  the provider's redirect back
//	POST apikey    signs in with a pasted API key ({"key": "..."})
//	POST logout    ends the session
func (s *Sessions) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Prefix+"session", s.serveSession)
	mux.HandleFunc("GET "+Prefix+"login", s.serveLogin)
	mux.HandleFunc("GET "+CallbackPath, s.serveCallback)
	mux.HandleFunc("POST "+Prefix+"apikey", s.serveAPIKey)
	mux.HandleFunc("POST "+Prefix+"logout", s.serveLogout)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		mux.ServeHTTP(w, r)
	})
}

// sessionInfo is what the console shows of the signed-in caller, or how
// one may sign in.
type sessionInfo struct {
	SignedIn bool   `json:"signedIn"`
	Subject  string `json:"subject,omitempty"`
	Name     string `json:"name,omitempty"`
	// Provider is the name on the "Sign in with" button; "" without
	// auth.oidc.
	Provider string `json:"provider,omitempty"`
}

func (s *Sessions) serveSession(w http.ResponseWriter, r *http.Request) {
	sess, err := s.read(r.Header)
	if err == nil {
		p, perr := s.principal(r.Context(), sess)
		if perr == nil {
			name := p.Name
			if name == "" {
				name = p.Subject
			}
			writeJSON(w, http.StatusOK, sessionInfo{SignedIn: true, Subject: p.Subject, Name: name})
			return
		}
		err = perr
	}
	if !isBad(err) {
		s.cfg.Log.WarnContext(r.Context(), "could not verify a console session", "error", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "could not verify the session now; retry"})
		return
	}
	if !errors.Is(err, authn.ErrNoSession) {
		clearCookie(w, r, CookieName, "/")
	}
	info := sessionInfo{}
	if s.cfg.Users != nil {
		info.Provider = s.cfg.ProviderName
	}
	writeJSON(w, http.StatusUnauthorized, info)
}

func (s *Sessions) serveAPIKey(w http.ResponseWriter, r *http.Request) {
	if err := consoleRequest(r.Context(), r.Header); err != nil {
		writeJSON(w, http.StatusForbidden, map[string]string{"error": err.Error()})
		return
	}
	var body struct {
		Key string `json:"key"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, maxSignInBody)).Decode(&body); err != nil || strings.TrimSpace(body.Key) == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": `send {"key": "<FLYTE_API_KEY or key id:secret>"}`})
		return
	}
	keyID, _, err := s.cfg.Keys.SignIn(r.Context(), body.Key)
	if isBad(err) {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "that is not an active API key of this manager"})
		return
	}
	if err != nil {
		s.cfg.Log.WarnContext(r.Context(), "could not check an API key at console sign-in", "error", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "could not check the key now; retry"})
		return
	}
	if !s.startSession(w, r, keyID, nil) {
		return
	}
	s.serveSession(w, withCookieOf(r, w))
}

func (s *Sessions) serveLogout(w http.ResponseWriter, r *http.Request) {
	if err := consoleRequest(r.Context(), r.Header); err != nil {
		writeJSON(w, http.StatusForbidden, map[string]string{"error": err.Error()})
		return
	}
	if sess, err := s.read(r.Header); err == nil {
		s.signOut(sess)
	}
	clearCookie(w, r, CookieName, "/")
	w.WriteHeader(http.StatusNoContent)
}

// startSession sets the session cookie for keyID or user; false when it
// answered an error.
func (s *Sessions) startSession(w http.ResponseWriter, r *http.Request, keyID string, user *oidcauth.Identity) bool {
	value, expires, err := s.issue(keyID, user)
	if err != nil {
		s.cfg.Log.ErrorContext(r.Context(), "could not seal a console session", "error", err)
		http.Error(w, "could not start the session", http.StatusInternalServerError)
		return false
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: value, Path: "/", Expires: expires,
		MaxAge: int(time.Until(expires).Seconds()), HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteLaxMode})
	return true
}

// withCookieOf is r carrying the session cookie w just set, so the answer
// to a sign-in can say who signed in.
func withCookieOf(r *http.Request, w http.ResponseWriter) *http.Request {
	r2 := r.Clone(r.Context())
	r2.Header.Del("Cookie")
	for _, c := range (&http.Response{Header: w.Header()}).Cookies() {
		if c.Name == CookieName {
			r2.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
		}
	}
	return r2
}

// secure reports whether the browser reached the manager over TLS (itself
// or a proxy named by server.externalURL): the cookies are Secure then.
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(requrl.BaseURL(r.Context()), "https://")
}

func clearCookie(w http.ResponseWriter, r *http.Request, name, path string) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: path, MaxAge: -1, HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteLaxMode})
}

// safeNext is where a sign-in may return: a console page of this manager,
// never another site.
func safeNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || !strings.HasPrefix(u.Path, consoleHome) || strings.Contains(next, `\`) {
		return consoleHome
	}
	return u.RequestURI()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
