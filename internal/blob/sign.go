package blob

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// SignedPath is where the manager serves signed blob URLs:
// <base>/blobs/<key>?m=<method>&exp=<unix seconds>[&md5=<b64url>]&sig=<b64url>.
const SignedPath = "/blobs/"

// MinSigningKeyBytes is the shortest signing key NewSigner accepts.
const MinSigningKeyBytes = 16

var (
	// ErrSignatureInvalid: the URL was not signed by us, or was altered.
	ErrSignatureInvalid = errors.New("signature invalid")
	// ErrURLExpired: a genuine URL whose lifetime is over. The text contains
	// "request has expired", which the SDK recognises as an expired upload URL.
	ErrURLExpired = errors.New("URL expired: the request has expired")
)

// Signer mints and checks signed blob URLs with HMAC-SHA256 under the
// configured signing key. The signature covers the method, the key, the
// expiry and the content MD5 (when one is signed).
type Signer struct {
	key []byte
}

// NewSigner returns a Signer for key (storage.signingKey).
func NewSigner(key []byte) (*Signer, error) {
	if len(key) < MinSigningKeyBytes {
		return nil, errors.New("the blob signing key (storage.signingKey) must be at least 16 bytes")
	}
	return &Signer{key: append([]byte(nil), key...)}, nil
}

// Sign returns the absolute URL granting method (GET or PUT; a GET URL also
// allows HEAD) on key until expiresAt. base is scheme://host[/path] the
// client reaches the manager on. A non-empty contentMD5 binds a PUT to that
// content: the uploader must send it as Content-MD5 and the body must match.
func (s *Signer) Sign(base, method, key string, expiresAt time.Time, contentMD5 []byte) string {
	method = strings.ToUpper(method)
	exp := expiresAt.Unix()
	var b strings.Builder
	b.WriteString(strings.TrimRight(base, "/"))
	b.WriteString(SignedPath)
	b.WriteString(escapeKey(key))
	b.WriteString("?m=")
	b.WriteString(url.QueryEscape(method))
	b.WriteString("&exp=")
	b.WriteString(strconv.FormatInt(exp, 10))
	if len(contentMD5) > 0 {
		b.WriteString("&md5=")
		b.WriteString(base64.RawURLEncoding.EncodeToString(contentMD5))
	}
	b.WriteString("&sig=")
	b.WriteString(base64.RawURLEncoding.EncodeToString(s.mac(method, key, exp, contentMD5)))
	return b.String()
}

// Grant is what a verified URL allows.
type Grant struct {
	Method     string // GET or PUT
	Key        string
	ExpiresAt  time.Time
	ContentMD5 []byte // nil when the URL binds no content
}

// Allows reports whether the grant covers an HTTP request method.
func (g Grant) Allows(method string) bool {
	return method == g.Method || (g.Method == http.MethodGet && method == http.MethodHead)
}

// Verify checks the query of a signed URL for key at time now. It returns
// ErrSignatureInvalid for anything we did not sign (checked in constant
// time), and ErrURLExpired for a genuine URL past its expiry.
func (s *Signer) Verify(key string, q url.Values, now time.Time) (Grant, error) {
	method := q.Get("m")
	exp, err := strconv.ParseInt(q.Get("exp"), 10, 64)
	if err != nil || (method != http.MethodGet && method != http.MethodPut) {
		return Grant{}, ErrSignatureInvalid
	}
	var sum []byte
	if v, ok := q["md5"]; ok {
		sum, err = base64.RawURLEncoding.DecodeString(v[0])
		if err != nil || len(sum) != md5.Size {
			return Grant{}, ErrSignatureInvalid
		}
	}
	sig, err := base64.RawURLEncoding.DecodeString(q.Get("sig"))
	if err != nil || !hmac.Equal(sig, s.mac(method, key, exp, sum)) {
		return Grant{}, ErrSignatureInvalid
	}
	g := Grant{Method: method, Key: key, ExpiresAt: time.Unix(exp, 0), ContentMD5: sum}
	if !now.Before(g.ExpiresAt) {
		return Grant{}, ErrURLExpired
	}
	return g, nil
}

// mac signs the length-prefixed fields, so no field can bleed into another.
func (s *Signer) mac(method, key string, exp int64, contentMD5 []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	field := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		m.Write(n[:])
		m.Write(b)
	}
	field([]byte("fmgr-blob-url-v1"))
	field([]byte(method))
	field([]byte(key))
	field([]byte(strconv.FormatInt(exp, 10)))
	field(contentMD5)
	return m.Sum(nil)
}

// escapeKey escapes each segment of key for a URL path.
func escapeKey(key string) string {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// KeyFromPath extracts the (unescaped) key from a request path under
// SignedPath; ok is false when the path is not under it.
func KeyFromPath(p string) (key string, ok bool) {
	return strings.CutPrefix(p, SignedPath)
}
