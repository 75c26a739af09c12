package s3serve

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// Scoped keys: access keys the manager mints for one task attempt (or any
// holder it trusts with part of the bucket), limited to key prefixes and
// to a time. The access key ID carries its own grant (the prefixes and the
// expiry, readable by anyone who holds the key, which is nothing secret)
// and the secret key is an HMAC of that ID under the endpoint's master
// secret, so the endpoint checks a scoped key's signature without storing
// anything per key, and a holder who edits the grant in the ID no longer
// has its secret (SignatureDoesNotMatch).

// scopedKeyPrefix starts every scoped access key ID (v1 of the grant's
// form). A generated key has no "."; a configured key is looked up first,
// so it always means itself.
const scopedKeyPrefix = "FMS1."

// Grant is what a scoped key may do.
type Grant struct {
	// Read are the key prefixes under which the key reads (GET, HEAD,
	// lists, a copy's source).
	Read []string
	// Write are the key prefixes under which it also writes (PUT, DELETE,
	// multipart uploads, a copy's destination).
	Write []string
	// Files are single keys it reads (an attempt's inputs file where it
	// lies outside every prefix).
	Files []string
	// Expires is when the key stops working.
	Expires time.Time
}

type grantDoc struct {
	R []string `json:"r,omitempty"`
	W []string `json:"w,omitempty"`
	F []string `json:"f,omitempty"`
	E int64    `json:"e"`
}

// ScopedKey mints the access key ID and secret key of g, derived from
// master (the endpoint's master secret key, Options.ScopedMaster). Every
// prefix is taken as a directory: one without a trailing "/" gets one.
func ScopedKey(master string, g Grant) (id, secret string) {
	doc := grantDoc{R: dirs(g.Read), W: dirs(g.Write), F: g.Files, E: g.Expires.Unix()}
	b, _ := json.Marshal(doc) // strings and an integer: cannot fail
	id = scopedKeyPrefix + base64.RawURLEncoding.EncodeToString(b)
	return id, scopedSecret(master, id)
}

func dirs(ps []string) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		if p == "" {
			continue
		}
		if !strings.HasSuffix(p, "/") {
			p += "/"
		}
		out = append(out, p)
	}
	return out
}

// scopedSecret is the secret key of the scoped access key ID id.
func scopedSecret(master, id string) string {
	m := hmac.New(sha256.New, []byte(master))
	m.Write([]byte("flyte-manager s3 scoped key v1\n" + id))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// parseScoped reads the grant an access key ID carries; ok is false for
// anything that is not a well-formed scoped key ID.
func parseScoped(id string) (Grant, bool) {
	rest, ok := strings.CutPrefix(id, scopedKeyPrefix)
	if !ok {
		return Grant{}, false
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return Grant{}, false
	}
	var doc grantDoc
	if err := json.Unmarshal(b, &doc); err != nil || doc.E <= 0 {
		return Grant{}, false
	}
	for _, p := range append(append([]string(nil), doc.R...), doc.W...) {
		if p == "" || !strings.HasSuffix(p, "/") {
			return Grant{}, false
		}
	}
	return Grant{Read: doc.R, Write: doc.W, Files: doc.F, Expires: time.Unix(doc.E, 0)}, true
}

// mayRead says whether the grant covers reading key (nil: the full key).
func (g *Grant) mayRead(key string) bool {
	return g == nil || underAny(key, g.Read) || underAny(key, g.Write) || slices.Contains(g.Files, key)
}

// mayWrite says whether the grant covers writing key (nil: the full key).
func (g *Grant) mayWrite(key string) bool {
	return g == nil || underAny(key, g.Write)
}

// mayList says whether a list of prefix can show anything the grant may
// read: prefix lies under a readable prefix, or one lies under it (then
// the list is filtered by mayRead).
func (g *Grant) mayList(prefix string) bool {
	if g == nil {
		return true
	}
	for _, p := range append(append([]string(nil), g.Read...), g.Write...) {
		if strings.HasPrefix(prefix, p) || strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}

func underAny(key string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// errOutOfScope is the refusal of a request outside a scoped key's grant.
func errOutOfScope() *apiError {
	return errAccessDenied("Access Denied: the access key does not cover this object")
}

// secretOf is the secret key of access key ID id: a configured key's, or
// a scoped key's derived one (with its grant).
func (s *Server) secretOf(id string) (secret string, g *Grant, ok bool) {
	if secret, ok := s.o.Keys[id]; ok {
		return secret, nil, true
	}
	if s.o.ScopedMaster == "" {
		return "", nil, false
	}
	gr, ok := parseScoped(id)
	if !ok {
		return "", nil, false
	}
	return scopedSecret(s.o.ScopedMaster, id), &gr, true
}
