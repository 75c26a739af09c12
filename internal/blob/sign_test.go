package blob

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
)

func mustSigner(t *testing.T, key string) *Signer {
	t.Helper()
	s, err := NewSigner([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// parse splits a signed URL into the key it names and its query.
func parse(t *testing.T, raw string) (string, url.Values) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	key, ok := KeyFromPath(u.Path)
	if !ok {
		t.Fatalf("%s is not under %s", u.Path, SignedPath)
	}
	return key, u.Query()
}

func TestSignVerify(t *testing.T) {
	s := mustSigner(t, "0123456789abcdef0123")
	now := time.Unix(1_700_000_000, 0)
	sum := md5.Sum([]byte("content"))
	key := "uploads/_/p/d/root dir/ü+x.tar.gz"

	raw := s.Sign("http://localhost:8090/", "put", key, now.Add(time.Hour), sum[:])
	if !strings.HasPrefix(raw, "http://localhost:8090/blobs/uploads/_/p/d/root%20dir/") {
		t.Fatalf("unexpected URL shape: %s", raw)
	}
	gotKey, q := parse(t, raw)
	if gotKey != key {
		t.Fatalf("key from URL = %q, want %q", gotKey, key)
	}
	g, err := s.Verify(gotKey, q, now)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if g.Method != "PUT" || g.Key != key || !bytes.Equal(g.ContentMD5, sum[:]) || !g.ExpiresAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("grant = %+v", g)
	}
	if !g.Allows("PUT") || g.Allows("GET") || g.Allows("HEAD") {
		t.Fatalf("PUT grant allows the wrong methods")
	}

	get := s.Sign("http://h", "GET", key, now.Add(time.Minute), nil)
	k2, q2 := parse(t, get)
	g2, err := s.Verify(k2, q2, now)
	if err != nil || !g2.Allows("GET") || !g2.Allows("HEAD") || g2.Allows("PUT") || g2.ContentMD5 != nil {
		t.Fatalf("GET grant %+v, %v", g2, err)
	}

	// Expired: a genuine URL past its time.
	if _, err := s.Verify(gotKey, q, now.Add(time.Hour)); !errors.Is(err, ErrURLExpired) {
		t.Fatalf("expired Verify = %v", err)
	}
	if !strings.Contains(ErrURLExpired.Error(), "request has expired") {
		t.Fatal("the SDK matches 'request has expired' to recognise expired URLs")
	}

	tamper := func(name string, mutate func(q url.Values) string) {
		t.Helper()
		_, orig := parse(t, raw)
		k := mutate(orig)
		if k == "" {
			k = key
		}
		if _, err := s.Verify(k, orig, now); !errors.Is(err, ErrSignatureInvalid) {
			t.Errorf("%s: Verify = %v, want ErrSignatureInvalid", name, err)
		}
	}
	tamper("other key", func(q url.Values) string { return key + "x" })
	tamper("method", func(q url.Values) string { q.Set("m", "GET"); return "" })
	tamper("bad method", func(q url.Values) string { q.Set("m", "DELETE"); return "" })
	tamper("expiry", func(q url.Values) string { q.Set("exp", "99999999999"); return "" })
	tamper("md5 changed", func(q url.Values) string {
		other := md5.Sum([]byte("other"))
		q.Set("md5", base64.RawURLEncoding.EncodeToString(other[:]))
		return ""
	})
	tamper("md5 dropped", func(q url.Values) string { q.Del("md5"); return "" })
	tamper("md5 short", func(q url.Values) string { q.Set("md5", "AAAA"); return "" })
	tamper("signature flipped", func(q url.Values) string {
		sig := []byte(q.Get("sig"))
		if sig[0] == 'A' {
			sig[0] = 'B'
		} else {
			sig[0] = 'A'
		}
		q.Set("sig", string(sig))
		return ""
	})
	tamper("signature missing", func(q url.Values) string { q.Del("sig"); return "" })
	tamper("signature garbage", func(q url.Values) string { q.Set("sig", "!!"); return "" })

	// Another key signs differently.
	other := mustSigner(t, "another-signing-key-000")
	if _, err := other.Verify(gotKey, q, now); !errors.Is(err, ErrSignatureInvalid) {
		t.Fatalf("foreign key Verify = %v", err)
	}
}

func TestNewSignerRejectsShortKeys(t *testing.T) {
	if _, err := NewSigner([]byte("short")); err == nil {
		t.Fatal("NewSigner accepted a 5-byte key")
	}
}
