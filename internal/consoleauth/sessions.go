// Package consoleauth signs people in to the web console when auth.mode is
// required: through the identity provider of auth.oidc (the OAuth2
// authorization code flow with PKCE, the manager the client) or with an
// API key pasted once. Either ends in a session cookie the manager seals
// (HttpOnly, SameSite=Lax, Secure over TLS) naming the key or the person
// and their groups; the server's auth interceptor asks VerifySession for
// requests without a bearer credential, and accepts the cookie only from
// the console's own page (csrf.go). The routes are in handler.go.
package consoleauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/oidcauth"
)

// CookieName is the session cookie's name.
const CookieName = "flyte_console_session"

// Keys checks API keys (apikey.Issuer).
type Keys interface {
	// SignIn checks a pasted key and answers its id and principal.
	SignIn(ctx context.Context, pasted string) (keyID string, p authn.Principal, err error)
	// KeyPrincipal reads the key now: authn.ErrBadCredential once revoked.
	KeyPrincipal(ctx context.Context, keyID string) (authn.Principal, error)
}

// Users verifies the provider's ID tokens (oidcauth.Verifier).
type Users interface {
	VerifyIDToken(ctx context.Context, raw, clientID, nonce string) (oidcauth.Identity, error)
	Principal(id oidcauth.Identity) authn.Principal
	// BoundGroups is those of groups some binding names.
	BoundGroups(groups []string) []string
	Discovery() *oidcauth.Discovery
}

// Config is what Sessions needs.
type Config struct {
	// SigningKey is the manager's key (storage.signingKey); the cookie
	// key is derived from it.
	SigningKey []byte
	// TTL is how long a session lasts.
	TTL  time.Duration
	Keys Keys
	// Users is nil without auth.oidc: only API keys sign in then.
	Users Users
	// ClientID, ClientSecret ("" for a public client), Scopes and
	// ProviderName are the provider sign-in's (config.ConsoleAuth).
	ClientID, ClientSecret string
	Scopes                 []string
	ProviderName           string
	// HTTPClient talks to the provider's token endpoint (nil:
	// http.DefaultClient).
	HTTPClient *http.Client
	Log        *slog.Logger
}

// Sessions issues and verifies console sessions (authn.SessionVerifier).
type Sessions struct {
	cfg  Config
	seal *sealer
	now  func() time.Time

	mu        sync.Mutex
	signedOut map[string]int64 // session id -> its expiry (unix)
}

var _ authn.SessionVerifier = (*Sessions)(nil)

// New returns the sessions of cfg.
func New(cfg Config) (*Sessions, error) {
	s, err := newSealer(cfg.SigningKey)
	if err != nil {
		return nil, err
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Sessions{cfg: cfg, seal: s, now: time.Now, signedOut: map[string]int64{}}, nil
}

// session is what the cookie holds, sealed.
type session struct {
	ID   string             `json:"i"`
	Key  string             `json:"k,omitempty"` // an API key's id
	User *oidcauth.Identity `json:"u,omitempty"` // or a person
	Exp  int64              `json:"e"`
}

const sessionPurpose = "session"

// maxCookie is the most a session cookie's value may take: browsers drop
// cookies over 4 KB, name and attributes included.
const maxCookie = 3800

// issue seals a new session for key or user. A person with more groups
// than a cookie holds keeps only the groups auth.bindings name.
func (s *Sessions) issue(keyID string, user *oidcauth.Identity) (value string, expires time.Time, err error) {
	expires = s.now().Add(s.cfg.TTL)
	sess := session{ID: randomString(16), Key: keyID, User: user, Exp: expires.Unix()}
	value, err = s.seal.seal(sessionPurpose, sess)
	if err == nil && len(value) > maxCookie && user != nil && s.cfg.Users != nil {
		slim := *user
		slim.Groups = s.cfg.Users.BoundGroups(user.Groups)
		sess.User = &slim
		value, err = s.seal.seal(sessionPurpose, sess)
	}
	if err == nil && len(value) > maxCookie {
		err = errors.New("the session does not fit in a cookie (too many groups bound, or too long a name)")
	}
	return value, expires, err
}

// errSession is a session cookie that does not authenticate anyone.
var errSession = fmt.Errorf("%w: the console session is forged, expired or signed out", authn.ErrBadCredential)

// read opens the session cookie of h: authn.ErrNoSession without one.
func (s *Sessions) read(h http.Header) (session, error) {
	c, err := (&http.Request{Header: h}).Cookie(CookieName)
	if err != nil || c.Value == "" {
		return session{}, authn.ErrNoSession
	}
	var sess session
	if err := s.seal.open(sessionPurpose, c.Value, &sess); err != nil || s.now().Unix() >= sess.Exp {
		return session{}, errSession
	}
	s.mu.Lock()
	_, out := s.signedOut[sess.ID]
	s.mu.Unlock()
	if out {
		return session{}, errSession
	}
	return sess, nil
}

// VerifySession implements authn.SessionVerifier.
func (s *Sessions) VerifySession(ctx context.Context, h http.Header) (authn.Principal, error) {
	sess, err := s.read(h)
	if err != nil {
		return authn.Principal{}, err
	}
	if err := consoleRequest(ctx, h); err != nil {
		return authn.Principal{}, err
	}
	return s.principal(ctx, sess)
}

// VerifyRead implements authn.SessionVerifier.
func (s *Sessions) VerifyRead(ctx context.Context, h http.Header) (authn.Principal, error) {
	sess, err := s.read(h)
	if err != nil {
		return authn.Principal{}, err
	}
	if err := browserRead(ctx, h); err != nil {
		return authn.Principal{}, err
	}
	return s.principal(ctx, sess)
}

// principal is who sess names, with their roles now: a key is read on
// every request (revoking it ends its sessions), a person's roles come
// from auth.bindings for their subject and groups.
func (s *Sessions) principal(ctx context.Context, sess session) (authn.Principal, error) {
	switch {
	case sess.Key != "":
		return s.cfg.Keys.KeyPrincipal(ctx, sess.Key)
	case sess.User != nil && s.cfg.Users != nil:
		return s.cfg.Users.Principal(*sess.User), nil
	}
	return authn.Principal{}, errSession
}

// signOut ends sess for good (until its expiry, when the cookie would be
// refused anyway), forgetting sessions that expired.
func (s *Sessions) signOut(sess session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now().Unix()
	for id, exp := range s.signedOut {
		if exp <= now {
			delete(s.signedOut, id)
		}
	}
	s.signedOut[sess.ID] = sess.Exp
}

// isBad reports whether err is a credential that does not authenticate
// (rather than a failure to check it).
func isBad(err error) bool {
	return errors.Is(err, authn.ErrBadCredential) || errors.Is(err, authn.ErrNoSession)
}
