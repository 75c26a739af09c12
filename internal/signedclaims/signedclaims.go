// Package signedclaims is the form of the manager's self-contained bearer
// credentials (internal/taskcred, internal/appcred): a prefix naming the
// kind, the claims as base64url JSON, a dot, and the HMAC-SHA256 of all
// that under a key derived from the manager's signing key. Nothing is
// stored: a credential is valid while its signature is.
package signedclaims

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
)

// Key mints and opens the credentials of one kind.
type Key struct {
	key    []byte
	prefix string
}

// Derive derives the key of credentials that start with prefix from the
// manager's signing key, separated from its other uses by label.
func Derive(managerKey, label, prefix string) Key {
	m := hmac.New(sha256.New, []byte(managerKey))
	m.Write([]byte(label))
	return Key{key: m.Sum(nil), prefix: prefix}
}

// Mint returns the credential carrying claims, which must marshal to JSON
// (plain structs of strings and numbers do).
func (k Key) Mint(claims any) string {
	payload, err := json.Marshal(claims)
	if err != nil {
		panic("signedclaims: claims do not marshal: " + err.Error())
	}
	body := k.prefix + base64.RawURLEncoding.EncodeToString(payload)
	return body + "." + base64.RawURLEncoding.EncodeToString(k.sign(body))
}

// Open unmarshals the claims of credential into claims and reports whether
// it is one of this key's, intact: false for another kind, a malformed or
// a forged one (claims are then left as they were or partly set).
func (k Key) Open(credential string, claims any) bool {
	if !strings.HasPrefix(credential, k.prefix) {
		return false
	}
	payload, sig, ok := strings.Cut(strings.TrimPrefix(credential, k.prefix), ".")
	if !ok {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, k.sign(k.prefix+payload)) {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	return err == nil && json.Unmarshal(raw, claims) == nil
}

func (k Key) sign(body string) []byte {
	m := hmac.New(sha256.New, k.key)
	m.Write([]byte(body))
	return m.Sum(nil)
}
