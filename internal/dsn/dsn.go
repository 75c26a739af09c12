// Package dsn makes database connection strings safe to show. It is the one
// redactor used wherever a DSN reaches a person: `flyte-manager config`, the
// start banner, configuration errors and the database's open errors.
//
// It understands the two forms PostgreSQL clients accept, URLs
// (postgres://user:password@host/db?password=...&sslpassword=...) and
// key=value strings (host=db password='a b' sslpassword=x), and the sqlite://
// and file: URLs of the embedded mode. Anything it cannot take apart is
// shown as Unparseable: it might hold a password in a place nobody expects.
package dsn

import (
	"net/url"
	"regexp"
	"strings"
)

// Redacted replaces each secret value.
const Redacted = "REDACTED"

// Unparseable stands for a DSN that could not be taken apart.
const Unparseable = "(unparseable)"

// secretKeys are the parameters whose values are secrets (compared in lower
// case): libpq's and pgx's password and the passphrase of the client key.
var secretKeys = map[string]bool{"password": true, "sslpassword": true}

// urlScheme matches a URL's "scheme:" prefix.
var urlScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// Redact returns s with every password replaced by Redacted, or Unparseable.
// The empty string stays empty.
func Redact(s string) string {
	out, _ := parse(s)
	return out
}

// Secrets returns the secret values in s, as written and decoded, so that a
// driver's message quoting any of them can be scrubbed. It is empty for a DSN
// that could not be taken apart.
func Secrets(s string) []string {
	_, secrets := parse(s)
	return secrets
}

func parse(s string) (redacted string, secrets []string) {
	switch {
	case s == "":
		return "", nil
	case urlScheme.MatchString(s):
		return parseURL(s)
	case strings.Contains(s, "="):
		return parseKeyValues(s)
	}
	return Unparseable, nil
}

func parseURL(s string) (string, []string) {
	u, err := url.Parse(s)
	// A fragment, an opaque part with an "@" or a space is a password with
	// an unescaped '#', a URL missing its "//" or a key=value string with a
	// colon in its first word: never print those.
	if err != nil || u.Fragment != "" || strings.Contains(u.Opaque, "@") || strings.ContainsFunc(s, func(r rune) bool { return r < '!' }) {
		return Unparseable, nil
	}
	var secrets []string
	if p, ok := u.User.Password(); ok {
		secrets = append(secrets, p, url.PathEscape(p), url.QueryEscape(p))
		u.User = url.UserPassword(u.User.Username(), Redacted)
	}
	if u.RawQuery != "" {
		params := strings.Split(u.RawQuery, "&")
		for i, param := range params {
			key, value, _ := strings.Cut(param, "=")
			name, err := url.QueryUnescape(key)
			if err != nil {
				name = key
			}
			if !secretKeys[strings.ToLower(name)] {
				continue
			}
			secrets = append(secrets, value)
			if v, err := url.QueryUnescape(value); err == nil {
				secrets = append(secrets, v)
			}
			params[i] = key + "=" + Redacted
		}
		u.RawQuery = strings.Join(params, "&")
	}
	return u.String(), nonEmpty(secrets)
}

// parseKeyValues follows libpq's conninfo syntax: key = value pairs
// separated by spaces; a value is a word or single-quoted, with backslash
// escaping a quote or a backslash. Everything outside secret values is kept
// as written.
func parseKeyValues(s string) (string, []string) {
	var b strings.Builder
	var secrets []string
	i := 0
	for {
		start := i
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		b.WriteString(s[start:i])
		if i == len(s) {
			return b.String(), nonEmpty(secrets)
		}
		keyStart := i
		for i < len(s) && s[i] != '=' && !isSpace(s[i]) {
			i++
		}
		key := s[keyStart:i]
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if key == "" || i == len(s) || s[i] != '=' {
			return Unparseable, nil
		}
		i++ // '='
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		b.WriteString(s[keyStart:i])
		valueStart := i
		var value strings.Builder
		if i < len(s) && s[i] == '\'' {
			i++
			closed := false
			for i < len(s) && !closed {
				switch c := s[i]; {
				case c == '\\' && i+1 < len(s):
					value.WriteByte(s[i+1])
					i += 2
				case c == '\'':
					closed = true
					i++
				default:
					value.WriteByte(c)
					i++
				}
			}
			if !closed {
				return Unparseable, nil
			}
		} else {
			for i < len(s) && !isSpace(s[i]) {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				value.WriteByte(s[i])
				i++
			}
		}
		if secretKeys[strings.ToLower(key)] {
			secrets = append(secrets, value.String(), s[valueStart:i])
			b.WriteString(Redacted)
		} else {
			b.WriteString(s[valueStart:i])
		}
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

func nonEmpty(ss []string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
