package config

import (
	"errors"
	"net"
	"regexp"
	"strings"
)

// AuthAuto is auth.mode's default: off while every address the manager
// listens on is loopback (the embedded default: zero configuration stays
// zero configuration), required as soon as one reaches beyond it, or when
// an identity provider is configured (auth.oidc.issuer).
const AuthAuto = "auto"

// IsLoopbackHost reports whether a listen host binds loopback only:
// "localhost", a name under .localhost (RFC 6761), or a loopback IPv4 or
// IPv6 address (brackets allowed). "" and the wildcards 0.0.0.0 and ::
// bind every interface; any other name may resolve anywhere, so it counts
// as beyond loopback (no DNS is consulted).
func IsLoopbackHost(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(h, "[]"))
	return ip != nil && ip.IsLoopback()
}

// Listeners are the addresses the manager listens on, each as host:port:
// the API (server.host, server.port), and when they apply the console's
// local address, the apps' port, the Kubernetes-style API and the S3
// endpoint.
func (c *Config) Listeners() []string {
	addrs := []string{c.Server.ListenAddr()}
	if a := c.ConsoleLocalListen(); a != "" {
		addrs = append(addrs, a)
	}
	if c.Apps.Listen != "" {
		addrs = append(addrs, c.Apps.Listen)
	}
	if c.KubeAPI.Enabled && c.KubeAPI.Listen != "" {
		addrs = append(addrs, c.KubeAPI.Listen)
	}
	if e := c.Storage.S3Endpoint; e.Listen != "" && strings.HasPrefix(c.Storage.URL, "file://") {
		addrs = append(addrs, e.Listen)
	}
	return addrs
}

// ExposedListeners are the Listeners that reach beyond loopback.
func (c *Config) ExposedListeners() []string {
	var out []string
	for _, a := range c.Listeners() {
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			host = a // Validate reports a malformed address; count it as exposed
		}
		if !IsLoopbackHost(host) {
			out = append(out, a)
		}
	}
	return out
}

// ResolveAuth settles auth.mode "auto" into AuthOff or AuthRequired
// (Auth.Effective) from the listeners; an explicit mode is kept. Load runs
// it, and Prepare again, so a configuration changed in code in between is
// resolved by what it finally listens on.
func (c *Config) ResolveAuth() {
	switch {
	case c.Auth.Mode != AuthAuto:
		c.Auth.Effective = c.Auth.Mode
	case c.Auth.OIDC.Enabled() || len(c.ExposedListeners()) > 0:
		c.Auth.Effective = AuthRequired
	default:
		c.Auth.Effective = AuthOff
	}
}

// AuthOffButExposed lists the listeners beyond loopback while auth.mode
// is explicitly off: what the manager warns about at start and in
// /readyz. Empty when auth is on or everything is loopback.
func (c *Config) AuthOffButExposed() []string {
	if c.Auth.Required() {
		return nil
	}
	return c.ExposedListeners()
}

// bootstrapKeyID is what auth.bootstrapKey's id may be: the prefix of the
// manager's own key ids (apikey), then what a deployment tool generates.
var bootstrapKeyID = regexp.MustCompile(`^fmk[A-Za-z0-9_-]{8,64}$`)

// ParseBootstrapKey splits auth.bootstrapKey, "<key id>:<secret>".
func ParseBootstrapKey(v string) (keyID, secret string, err error) {
	keyID, secret, ok := strings.Cut(v, ":")
	if !ok || !bootstrapKeyID.MatchString(keyID) || len(secret) < 32 || strings.ContainsAny(secret, ": \t\n") {
		return "", "", errors.New(`must be "<key id>:<secret>": an id of "fmk" and 8 to 64 letters, digits, _ or -, and a secret of at least 32 characters without ":" or spaces`)
	}
	return keyID, secret, nil
}
