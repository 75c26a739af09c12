package consoleauth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
)

// sealer seals cookie values with AES-256-GCM: the browser holds them but
// can neither read nor change them (a changed byte fails to open). purpose
// is the additional data, so a value sealed as one kind of cookie does not
// open as another.
type sealer struct{ aead cipher.AEAD }

// newSealer derives the cookie key from the manager's signing key.
func newSealer(managerKey []byte) (*sealer, error) {
	m := hmac.New(sha256.New, managerKey)
	m.Write([]byte("flyte-manager console session v1"))
	block, err := aes.NewCipher(m.Sum(nil))
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

func (s *sealer) seal(purpose string, v any) (string, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, []byte(purpose))), nil
}

var errUnsealed = errors.New("the cookie was not sealed by this manager")

func (s *sealer) open(purpose, value string, into any) error {
	raw, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(raw) < s.aead.NonceSize() {
		return errUnsealed
	}
	n := s.aead.NonceSize()
	plain, err := s.aead.Open(nil, raw[:n], raw[n:], []byte(purpose))
	if err != nil {
		return errUnsealed
	}
	if err := json.Unmarshal(plain, into); err != nil {
		return errUnsealed
	}
	return nil
}

// randomString is n random bytes, base64url.
func randomString(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
