// Package oidctest is an OpenID Connect provider for tests, on plain HTTP
// at a loopback address: discovery, a JWKS with key rotation, a token
// endpoint (authorization_code with PKCE, device_code, refresh_token, and
// client_credentials for confidential clients), a
// device authorization endpoint that approves at once, and an
// authorization endpoint that redirects straight back with a code (its ID
// token carries the client id as aud and the request's nonce). Tokens
// are ES256 JWTs for the current user (SetUser).
package oidctest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// User is who the provider signs in.
type User struct {
	Subject string
	Email   string
	Groups  []string
}

// Issuer is a running provider.
type Issuer struct {
	// URL is the issuer URL (http://127.0.0.1:<port>).
	URL string
	// ClientID is the public client the flows accept.
	ClientID string
	// Audience is the "aud" of the tokens the flows issue.
	Audience string

	srv *httptest.Server

	mu     sync.Mutex
	keys   []jose.JSONWebKey // private; the last signs
	user   User
	grants map[string]grant // device codes, authorization codes, refresh tokens
	seen   map[string]int   // grant types the token endpoint served

	clients map[string]Client // confidential clients (clients.go)
}

type grant struct {
	user      User
	challenge string // authorization codes: the PKCE S256 challenge
	redirect  string
	nonce     string // authorization codes: the nonce the ID token carries
}

// New starts a provider for t, signing in User{Subject: "alice"}.
func New(t testing.TB) *Issuer {
	t.Helper()
	i := &Issuer{ClientID: "flyte-cli", Audience: "flyte-manager", user: User{Subject: "alice", Email: "alice@example.com"},
		grants: map[string]grant{}, seen: map[string]int{}}
	i.Rotate()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", i.discovery)
	mux.HandleFunc("GET /jwks", i.jwks)
	mux.HandleFunc("POST /device/code", i.deviceCode)
	mux.HandleFunc("GET /authorize", i.authorize)
	mux.HandleFunc("POST /token", i.token)
	i.srv = httptest.NewServer(mux)
	t.Cleanup(i.srv.Close)
	i.URL = i.srv.URL
	return i
}

// SetUser makes u the person the next flow signs in.
func (i *Issuer) SetUser(u User) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.user = u
}

// Rotate adds a new signing key and signs with it from now on (the JWKS
// keeps the old ones); it returns the new key's id.
func (i *Issuer) Rotate() string {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	kid := fmt.Sprintf("key-%d", len(i.keys)+1)
	i.keys = append(i.keys, jose.JSONWebKey{Key: k, KeyID: kid, Algorithm: string(jose.ES256), Use: "sig"})
	return kid
}

// GrantsServed is how many token requests of grant type gt succeeded.
func (i *Issuer) GrantsServed(gt string) int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.seen[gt]
}

// Claims are a valid token's claims for subject: this issuer, its
// Audience, issued now, expiring in an hour.
func (i *Issuer) Claims(subject string) map[string]any {
	now := time.Now()
	return map[string]any{"iss": i.URL, "aud": i.Audience, "sub": subject,
		"iat": now.Unix(), "nbf": now.Add(-time.Minute).Unix(), "exp": now.Add(time.Hour).Unix()}
}

// Sign signs claims with the current key.
func (i *Issuer) Sign(claims map[string]any) string {
	i.mu.Lock()
	k := i.keys[len(i.keys)-1]
	i.mu.Unlock()
	return SignWith(k, claims)
}

// Token is a valid access token for subject.
func (i *Issuer) Token(subject string) string { return i.Sign(i.Claims(subject)) }

// SignWith signs claims with key (its KeyID in the header): a key the
// issuer does not hold makes a token with a bad signature.
func SignWith(key jose.JSONWebKey, claims map[string]any) string {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(key.Algorithm), Key: key},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		panic(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		panic(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		panic(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		panic(err)
	}
	return out
}

// NewKey is a fresh ES256 key with id kid, held by no issuer.
func NewKey(kid string) jose.JSONWebKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return jose.JSONWebKey{Key: k, KeyID: kid, Algorithm: string(jose.ES256), Use: "sig"}
}

func (i *Issuer) discovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                i.URL,
		"authorization_endpoint":                i.URL + "/authorize",
		"token_endpoint":                        i.URL + "/token",
		"device_authorization_endpoint":         i.URL + "/device/code",
		"jwks_uri":                              i.URL + "/jwks",
		"response_types_supported":              []string{"code"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"ES256"},
		"code_challenge_methods_supported":      []string{"S256"},
	})
}

func (i *Issuer) jwks(w http.ResponseWriter, _ *http.Request) {
	i.mu.Lock()
	defer i.mu.Unlock()
	set := jose.JSONWebKeySet{}
	for _, k := range i.keys {
		set.Keys = append(set.Keys, k.Public())
	}
	writeJSON(w, http.StatusOK, set)
}

// deviceCode approves at once: the code is the current user's.
func (i *Issuer) deviceCode(w http.ResponseWriter, r *http.Request) {
	if r.PostFormValue("client_id") != i.ClientID {
		writeJSON(w, http.StatusUnauthorized, oauthErr("invalid_client", "unknown client"))
		return
	}
	code := i.newGrant(grant{})
	writeJSON(w, http.StatusOK, map[string]any{
		"device_code": code, "user_code": code[:8], "verification_uri": i.URL + "/device",
		"expires_in": 600, "interval": 1,
	})
}

// authorize redirects straight back with a code for the current user.
func (i *Issuer) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	redirect, err := url.Parse(q.Get("redirect_uri"))
	switch {
	case q.Get("client_id") != i.ClientID:
		http.Error(w, "unknown client", http.StatusBadRequest)
		return
	case err != nil || redirect.Scheme == "" || q.Get("response_type") != "code":
		http.Error(w, "bad redirect_uri or response_type", http.StatusBadRequest)
		return
	case q.Get("code_challenge") == "" || q.Get("code_challenge_method") != "S256":
		http.Error(w, "PKCE with S256 is required", http.StatusBadRequest)
		return
	}
	code := i.newGrant(grant{challenge: q.Get("code_challenge"), redirect: q.Get("redirect_uri"), nonce: q.Get("nonce")})
	back := redirect.Query()
	back.Set("code", code)
	back.Set("state", q.Get("state"))
	redirect.RawQuery = back.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

func (i *Issuer) token(w http.ResponseWriter, r *http.Request) {
	gt := r.PostFormValue("grant_type")
	var key string
	switch gt {
	case "urn:ietf:params:oauth:grant-type:device_code":
		key = r.PostFormValue("device_code")
	case "authorization_code", "refresh_token":
		key = r.PostFormValue("code") + r.PostFormValue("refresh_token")
	case "client_credentials":
		i.clientCredentials(w, r) // clients.go
		return
	default:
		writeJSON(w, http.StatusBadRequest, oauthErr("unsupported_grant_type", gt))
		return
	}
	if r.PostFormValue("client_id") != i.ClientID {
		writeJSON(w, http.StatusUnauthorized, oauthErr("invalid_client", "unknown client"))
		return
	}
	i.mu.Lock()
	g, ok := i.grants[key]
	delete(i.grants, key)
	i.mu.Unlock()
	if !ok || key == "" {
		writeJSON(w, http.StatusBadRequest, oauthErr("invalid_grant", "unknown or used code"))
		return
	}
	if gt == "authorization_code" {
		sum := sha256.Sum256([]byte(r.PostFormValue("code_verifier")))
		if base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge || r.PostFormValue("redirect_uri") != g.redirect {
			writeJSON(w, http.StatusBadRequest, oauthErr("invalid_grant", "PKCE verifier or redirect_uri mismatch"))
			return
		}
	}
	claims := i.Claims(g.user.Subject)
	claims["email"] = g.user.Email
	if g.user.Groups != nil {
		claims["groups"] = g.user.Groups
	}
	refresh := i.newGrantFor(g.user)
	i.mu.Lock()
	i.seen[gt]++
	i.mu.Unlock()
	access := i.Sign(claims)
	// The ID token is for the client (its aud), with the sign-in's nonce.
	idClaims := maps.Clone(claims)
	idClaims["aud"] = i.ClientID
	if g.nonce != "" {
		idClaims["nonce"] = g.nonce
	}
	writeJSON(w, http.StatusOK, map[string]any{"access_token": access, "id_token": i.Sign(idClaims), "token_type": "Bearer",
		"expires_in": 3600, "refresh_token": refresh})
}

// newGrant records g for the current user and returns its code.
func (i *Issuer) newGrant(g grant) string {
	i.mu.Lock()
	g.user = i.user
	i.mu.Unlock()
	return i.store(g)
}

func (i *Issuer) newGrantFor(u User) string { return i.store(grant{user: u}) }

func (i *Issuer) store(g grant) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	code := hex.EncodeToString(b)
	i.mu.Lock()
	defer i.mu.Unlock()
	i.grants[code] = g
	return code
}

func oauthErr(code, desc string) map[string]string {
	return map[string]string{"error": code, "error_description": desc}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
