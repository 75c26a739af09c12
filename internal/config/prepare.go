package config

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// SigningKeyFile is the file, inside the data directory, holding the
// generated signing key.
const SigningKeyFile = "signing.key"

// Prepare makes the process and the data directory private (private.go:
// umask 077, the home created or tightened to 0700, or refused when another
// user owns it) and makes sure a signing key is set: when
// storage.signingKey is empty it is read from <home>/signing.key, which is
// created (mode 0600) with a random key the first time. It also settles
// auth.mode "auto" by the listeners as they are now (ResolveAuth).
func (c *Config) Prepare() error {
	c.ResolveAuth()
	if err := c.makePrivate(); err != nil {
		return err
	}
	if c.Storage.SigningKey != "" {
		return nil
	}
	key, err := loadOrCreateKey(filepath.Join(c.Home, SigningKeyFile))
	if err != nil {
		return err
	}
	c.Storage.SigningKey = key
	return nil
}

func loadOrCreateKey(path string) (string, error) {
	for range 2 {
		data, err := os.ReadFile(path)
		if err == nil {
			key := strings.TrimSpace(string(data))
			if key == "" {
				return "", fmt.Errorf("signing key file %s is empty; delete it to generate a new key", path)
			}
			return key, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("reading signing key: %w", err)
		}
		raw := make([]byte, 32)
		if _, err := rand.Read(raw); err != nil {
			return "", fmt.Errorf("generating signing key: %w", err)
		}
		key := base64.RawURLEncoding.EncodeToString(raw)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue // another process created it first: read theirs
		}
		if err != nil {
			return "", fmt.Errorf("creating signing key: %w", err)
		}
		_, werr := f.WriteString(key + "\n")
		cerr := f.Close()
		if err := errors.Join(werr, cerr); err != nil {
			_ = os.Remove(path)
			return "", fmt.Errorf("writing signing key: %w", err)
		}
		return key, nil
	}
	return "", fmt.Errorf("signing key file %s could not be read or created", path)
}
