package apikey

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"fmgr.dev/internal/authn"
)

// keyIDPrefix starts every key id, so a key is recognizable in a log of
// client ids.
const keyIDPrefix = "fmk"

// IsKeyID reports whether id has the shape of a key id: the token
// endpoint answers client_credentials for such ids itself and forwards
// other client ids to the identity provider (internal/oidcauth).
func IsKeyID(id string) bool {
	return len(id) == len(keyIDPrefix)+16 && strings.HasPrefix(id, keyIDPrefix)
}

func newKeyMaterial() (id, secret string, err error) {
	idb, sb := make([]byte, 8), make([]byte, 32)
	if _, err := rand.Read(idb); err != nil {
		return "", "", err
	}
	if _, err := rand.Read(sb); err != nil {
		return "", "", err
	}
	return keyIDPrefix + hex.EncodeToString(idb), base64.RawURLEncoding.EncodeToString(sb), nil
}

// Encode is the key in the SDK's FLYTE_API_KEY format:
// base64("endpoint:client_id:client_secret:org"). The SDK splits it on the
// first three colons, so endpoint must be a bare host (no scheme, no
// port): it connects to https://endpoint on port 443.
func Encode(endpoint, keyID, secret string) (string, error) {
	if endpoint == "" || strings.ContainsAny(endpoint, ":/") {
		return "", fmt.Errorf("the endpoint of an API key must be a bare host name (the SDK connects to https://<host>:443), got %q", endpoint)
	}
	return base64.StdEncoding.EncodeToString([]byte(endpoint + ":" + keyID + ":" + secret + ":None")), nil
}

// Issuer mints and verifies the manager's tokens and API keys. It is the
// authn.Verifier of auth.mode required.
type Issuer struct {
	store *Store
	key   []byte
	ttl   time.Duration
	now   func() time.Time
}

// NewIssuer signs tokens with signingKey (HMAC-SHA256) valid for ttl.
func NewIssuer(store *Store, signingKey []byte, ttl time.Duration) *Issuer {
	return &Issuer{store: store, key: signingKey, ttl: ttl, now: time.Now}
}

var _ authn.Verifier = (*Issuer)(nil)

// tokenPrefix starts every token the manager mints.
const tokenPrefix = "fmt1."

type claims struct {
	Key string `json:"k"`
	Exp int64  `json:"e"`
}

// Exchange checks a key's id and secret (the client_credentials grant)
// and mints a token for it; authn.ErrBadCredential when they do not match
// an active key.
func (i *Issuer) Exchange(ctx context.Context, keyID, secret string) (token string, ttl time.Duration, err error) {
	if _, err := i.checkSecret(ctx, keyID, secret); err != nil {
		return "", 0, err
	}
	payload, err := json.Marshal(claims{Key: keyID, Exp: i.now().Add(i.ttl).Unix()})
	if err != nil {
		return "", 0, err
	}
	body := tokenPrefix + base64.RawURLEncoding.EncodeToString(payload)
	return body + "." + base64.RawURLEncoding.EncodeToString(i.sign(body)), i.ttl, nil
}

func (i *Issuer) sign(body string) []byte {
	m := hmac.New(sha256.New, i.key)
	m.Write([]byte(body))
	return m.Sum(nil)
}

func (i *Issuer) checkSecret(ctx context.Context, keyID, secret string) (Key, error) {
	k, err := i.store.active(ctx, keyID)
	if errors.Is(err, errNoKey) {
		return Key{}, authn.ErrBadCredential
	}
	if err != nil {
		return Key{}, err
	}
	if subtle.ConstantTimeCompare([]byte(hashSecret(secret)), []byte(k.SecretHash)) != 1 {
		return Key{}, authn.ErrBadCredential
	}
	return k, nil
}

// Verify accepts a token this manager minted, unexpired and from a key
// that is still active, or a key itself as "<key id>:<secret>" (for
// clients with admin.authType ExternalCommand).
func (i *Issuer) Verify(ctx context.Context, credential string) (authn.Principal, error) {
	var k Key
	var err error
	if body, sig, ok := strings.Cut(strings.TrimPrefix(credential, tokenPrefix), "."); ok && strings.HasPrefix(credential, tokenPrefix) {
		k, err = i.verifyToken(ctx, tokenPrefix+body, sig)
	} else if id, secret, ok := strings.Cut(credential, ":"); ok {
		k, err = i.checkSecret(ctx, id, secret)
	} else {
		return authn.Principal{}, authn.ErrBadCredential
	}
	if err != nil {
		return authn.Principal{}, err
	}
	return principal(k), nil
}

func (i *Issuer) verifyToken(ctx context.Context, body, sig string) (Key, error) {
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, i.sign(body)) {
		return Key{}, authn.ErrBadCredential
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(body, tokenPrefix))
	if err != nil {
		return Key{}, authn.ErrBadCredential
	}
	var c claims
	if err := json.Unmarshal(raw, &c); err != nil || i.now().Unix() >= c.Exp {
		return Key{}, authn.ErrBadCredential
	}
	// Read the key on every call: revocation takes effect at once.
	k, err := i.store.active(ctx, c.Key)
	if errors.Is(err, errNoKey) {
		return Key{}, authn.ErrBadCredential
	}
	return k, err
}

func principal(k Key) authn.Principal {
	return authn.Principal{Subject: "apikey:" + k.KeyID, Name: k.Name, Kind: authn.KindAPIKey,
		Bindings: []authn.Binding{{Role: k.Role, Project: k.Project, Domain: k.Domain}}}
}
