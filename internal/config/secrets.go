package config

import (
	"encoding/base64"
	"errors"
	"strings"
)

// SecretsKeyringFile is the keyring, inside the data directory, that the
// secret service generates when neither secrets.key nor secrets.keyFile is
// set.
const SecretsKeyringFile = "secrets.keyring"

// SecretKeySize is the size of an AES-256 key.
const SecretKeySize = 32

// ParseSecretKey decodes a secrets key: 32 bytes in standard or URL-safe
// base64, padded or not. Its errors never echo the key.
func ParseSecretKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if raw, err := enc.DecodeString(s); err == nil {
			if len(raw) != SecretKeySize {
				return nil, errors.New("must be a base64-encoded 32-byte key (e.g. `openssl rand -base64 32`)")
			}
			return raw, nil
		}
	}
	return nil, errors.New("is not base64; want a base64-encoded 32-byte key (e.g. `openssl rand -base64 32`)")
}
