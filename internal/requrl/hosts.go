package requrl

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// SplitHost normalizes a Host header (or :authority) into a lower-case name
// without a trailing dot or IPv6 brackets, and its port ("" when the client
// named none). ok is false for a value no client would send: empty, with a
// bad port, or with characters outside a host name or address.
func SplitHost(hostport string) (host, port string, ok bool) {
	hostport = strings.ToLower(strings.TrimSpace(hostport))
	if hostport == "" {
		return "", "", false
	}
	host = hostport
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		host, port = h, p
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", "", false
		}
	} else if strings.HasPrefix(hostport, "[") && strings.HasSuffix(hostport, "]") {
		host = hostport[1 : len(hostport)-1]
	}
	host = strings.TrimSuffix(host, ".")
	if host == "" || strings.ContainsFunc(host, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == ':' || r == '_' || r == '%')
	}) {
		return "", "", false
	}
	return host, port, true
}

// HostPattern is one server.allowedHosts entry: a name on any port, a name
// on one port, or every subdomain of a domain ("*.example.com", any port).
type HostPattern struct {
	name     string // for a wildcard: the domain, without "*."
	port     string // "" matches any port
	wildcard bool
}

// ParseHostPattern parses "name", "name:port" or "*.domain[:port]".
func ParseHostPattern(s string) (HostPattern, error) {
	if strings.Contains(s, "://") || strings.Contains(s, "/") {
		return HostPattern{}, fmt.Errorf("%q is a URL; give the host name alone, like flyte.example.com or flyte.example.com:8090", s)
	}
	var p HostPattern
	rest := s
	if strings.HasPrefix(rest, "*.") {
		p.wildcard = true
		rest = strings.TrimPrefix(rest, "*.")
	}
	host, port, ok := SplitHost(rest)
	if !ok || strings.Contains(host, "*") {
		return HostPattern{}, fmt.Errorf("%q is not a host name, host:port or *.domain", s)
	}
	if p.wildcard && (!strings.Contains(host, ".") && host != "localhost" || net.ParseIP(host) != nil) {
		// "*.com" would let any rebinding domain in.
		return HostPattern{}, fmt.Errorf("%q: a wildcard needs a domain of at least two labels", s)
	}
	p.name, p.port = host, port
	return p, nil
}

// Match reports whether a normalized host and port (from SplitHost) fit the
// pattern.
func (p HostPattern) Match(host, port string) bool {
	if p.port != "" && p.port != port {
		return false
	}
	if p.wildcard {
		return strings.HasSuffix(host, "."+p.name)
	}
	return host == p.name
}

// Origin is a browser origin normalized for comparison: lower case, the
// scheme's default port left out.
type Origin struct {
	Scheme, Host, Port string
}

// ParseOrigin parses an Origin header or a server.cors.allowedOrigins entry:
// http(s)://host[:port] and nothing more. "null" and anything else is an
// error.
func ParseOrigin(s string) (Origin, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return Origin{}, errors.New("want http(s)://host[:port]")
	}
	host, port, ok := SplitHost(u.Host)
	if !ok {
		return Origin{}, errors.New("want http(s)://host[:port]")
	}
	o := Origin{Scheme: strings.ToLower(u.Scheme), Host: host, Port: port}
	if o.Port == defaultPort(o.Scheme) {
		o.Port = ""
	}
	return o, nil
}

// String is the origin as a browser sends it.
func (o Origin) String() string {
	return o.Scheme + "://" + o.HostPort()
}

// HostPort is the origin's host with its port when not the default.
func (o Origin) HostPort() string {
	h := o.Host
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	if o.Port != "" {
		h += ":" + o.Port
	}
	return h
}

// SameHost reports whether the origin names host:port (from SplitHost), the
// port defaulting by the origin's scheme on both sides.
func (o Origin) SameHost(host, port string) bool {
	if port == defaultPort(o.Scheme) {
		port = ""
	}
	return o.Host == host && o.Port == port
}

func defaultPort(scheme string) string {
	if scheme == "https" {
		return "443"
	}
	return "80"
}
