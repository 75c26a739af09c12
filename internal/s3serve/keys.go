package s3serve

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// KeyFile is the file, inside the manager's data directory, holding the
// endpoint's generated key (LoadOrCreateKey).
const KeyFile = "s3-endpoint.key"

// keyIDChars are what a generated access key ID is made of (as AWS's).
const keyIDChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"

// LoadOrCreateKey reads the access key ID and secret key kept in path (two
// lines), creating the file (mode 0600) with a new random key the first
// time. Two processes racing to create it end up with the same key.
func LoadOrCreateKey(path string) (id, secret string, err error) {
	for range 2 {
		data, err := os.ReadFile(path)
		if err == nil {
			id, secret, _ = strings.Cut(strings.TrimSpace(string(data)), "\n")
			id, secret = strings.TrimSpace(id), strings.TrimSpace(secret)
			if id == "" || secret == "" {
				return "", "", fmt.Errorf("S3 endpoint key file %s is damaged; delete it to generate a new key", path)
			}
			return id, secret, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", "", fmt.Errorf("reading the S3 endpoint's key: %w", err)
		}
		id, secret = newKey()
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue // another process created it first: read theirs
		}
		if err != nil {
			return "", "", fmt.Errorf("creating the S3 endpoint's key: %w", err)
		}
		_, werr := f.WriteString(id + "\n" + secret + "\n")
		if err := errors.Join(werr, f.Close()); err != nil {
			_ = os.Remove(path)
			return "", "", fmt.Errorf("writing the S3 endpoint's key: %w", err)
		}
		return id, secret, nil
	}
	return "", "", fmt.Errorf("S3 endpoint key file %s could not be read or created", path)
}

// newKey returns a random access key ID ("FM" and 18 characters) and a
// secret key of 40 characters.
func newKey() (id, secret string) {
	b := make([]byte, 18+40)
	_, _ = rand.Read(b)
	var sb strings.Builder
	sb.WriteString("FM")
	for _, c := range b[:18] {
		sb.WriteByte(keyIDChars[int(c)%len(keyIDChars)])
	}
	const secretChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	var ss strings.Builder
	for _, c := range b[18:] {
		ss.WriteByte(secretChars[int(c)%len(secretChars)])
	}
	return sb.String(), ss.String()
}
