package apikey

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// A key is stored hashed, exchanged for a token at the token endpoint,
// and both authenticate until the key is revoked, which stops them at
// once; a wrong secret, a forged or an expired token never do.
func TestKeysTokensRevocation(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) {
		ctx := context.Background()
		st := NewStore(g)
		now := time.Now()
		iss := NewIssuer(st, DeriveSigningKey("k"), time.Hour)
		iss.now = func() time.Time { return now }

		if _, _, err := st.Create(ctx, "x", "owner", "p", "d"); err == nil {
			t.Error("an unknown role was accepted")
		}
		k, secret, err := st.Create(ctx, "ci", RoleContributor, "flytesnacks", Any)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(k.SecretHash, secret) || k.SecretHash == "" {
			t.Fatal("the secret is stored in the clear")
		}
		enc, err := Encode("flyte.example.com", k.KeyID, secret)
		if err != nil {
			t.Fatal(err)
		}
		dec, _ := base64.StdEncoding.DecodeString(enc)
		if parts := strings.SplitN(string(dec), ":", 4); len(parts) != 4 || parts[0] != "flyte.example.com" || parts[1] != k.KeyID || parts[2] != secret {
			t.Fatalf("FLYTE_API_KEY decodes to %q", dec)
		}
		if _, err := Encode("localhost:8090", k.KeyID, secret); err == nil {
			t.Error("an endpoint with a port was accepted (the SDK would split it as the client id)")
		}

		// The token endpoint, as the SDK's ClientSecret flow calls it.
		srv := httptest.NewServer(iss.TokenHandler(nil))
		defer srv.Close()
		post := func(id, sec, grant string) (int, map[string]any) {
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(url.Values{"grant_type": {grant}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if id != "" {
				req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(sec))
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var m map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&m)
			return resp.StatusCode, m
		}
		code, body := post(k.KeyID, secret, "client_credentials")
		if code != http.StatusOK || body["token_type"] != "Bearer" || body["expires_in"].(float64) != 3600 {
			t.Fatalf("token endpoint: %d %v", code, body)
		}
		token := body["access_token"].(string)
		if code, body := post(k.KeyID, "wrong", "client_credentials"); code != http.StatusUnauthorized || body["error"] != "invalid_client" {
			t.Errorf("wrong secret: %d %v", code, body)
		}
		if code, _ := post("", "", "client_credentials"); code != http.StatusUnauthorized {
			t.Errorf("no credentials: %d", code)
		}
		if code, body := post(k.KeyID, secret, "password"); code != http.StatusBadRequest || body["error"] != "unsupported_grant_type" {
			t.Errorf("password grant: %d %v", code, body)
		}

		for name, cred := range map[string]string{"token": token, "key": k.KeyID + ":" + secret} {
			p, err := iss.Verify(ctx, cred)
			if err != nil || p.Subject != "apikey:"+k.KeyID || p.Name != "ci" || p.Kind != authn.KindAPIKey {
				t.Errorf("%s: %v %v", name, p, err)
			}
		}
		bad := map[string]string{
			"garbage":      "nope",
			"wrong secret": k.KeyID + ":x",
			"forged":       token[:len(token)-4] + "AAAA",
			"other signer": func() string {
				other := NewIssuer(st, DeriveSigningKey("other"), time.Hour)
				tok, _, _ := other.Exchange(ctx, k.KeyID, secret)
				return tok
			}(),
		}
		for name, cred := range bad {
			if _, err := iss.Verify(ctx, cred); !errors.Is(err, authn.ErrBadCredential) {
				t.Errorf("%s: err %v, want ErrBadCredential", name, err)
			}
		}
		// Expiry.
		iss.now = func() time.Time { return now.Add(time.Hour + time.Second) }
		if _, err := iss.Verify(ctx, token); !errors.Is(err, authn.ErrBadCredential) {
			t.Errorf("expired token: %v", err)
		}
		iss.now = func() time.Time { return now }

		// Revocation stops the key and its tokens at once.
		if err := st.Revoke(ctx, k.KeyID); err != nil {
			t.Fatal(err)
		}
		if err := st.Revoke(ctx, k.KeyID); err != nil {
			t.Errorf("revoking twice: %v", err)
		}
		if err := st.Revoke(ctx, "fmkmissing"); err == nil {
			t.Error("revoking an unknown key succeeded")
		}
		for name, cred := range map[string]string{"token": token, "key": k.KeyID + ":" + secret} {
			if _, err := iss.Verify(ctx, cred); !errors.Is(err, authn.ErrBadCredential) {
				t.Errorf("%s after revocation: %v", name, err)
			}
		}
		if code, _ := post(k.KeyID, secret, "client_credentials"); code != http.StatusUnauthorized {
			t.Errorf("exchange after revocation: %d", code)
		}
		keys, err := st.List(ctx)
		if err != nil || len(keys) != 1 || keys[0].RevokedAt == nil {
			t.Errorf("list: %v %v", keys, err)
		}
	})
}
