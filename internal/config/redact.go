package config

import (
	"bytes"
	"net/url"
	"regexp"
	"slices"

	"go.yaml.in/yaml/v3"
)

// RedactedValue replaces secrets in printed configuration.
const RedactedValue = "REDACTED"

// Redacted returns a copy safe to print or log: the signing key and any
// password in the database DSN are replaced.
func (c Config) Redacted() Config {
	r := c
	r.Projects.Seed = slices.Clone(c.Projects.Seed)
	if r.Storage.SigningKey != "" {
		r.Storage.SigningKey = RedactedValue
	}
	r.Database.DSN = redactDSN(c.Database.DSN)
	return r
}

// YAML renders the configuration with secrets redacted.
func (c Config) YAML() ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(c.Redacted()); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// kvPassword matches password=... in key/value style PostgreSQL DSNs.
var kvPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// redactDSN hides the password of a URL-style or key/value DSN.
func redactDSN(dsn string) string {
	if dsn == "" {
		return dsn
	}
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), RedactedValue)
		}
		q := u.Query()
		changed := false
		for k := range q {
			if k == "password" || k == "sslpassword" {
				q.Set(k, RedactedValue)
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	return kvPassword.ReplaceAllString(dsn, "${1}"+RedactedValue)
}
