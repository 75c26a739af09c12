package apikey

import (
	"context"
	"errors"
	"testing"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/dbtest"
)

// The console's sign-in takes a key in the FLYTE_API_KEY format or as
// "<id>:<secret>"; a session then reads its key on every request, so
// revoking the key ends it.
func TestConsoleSignInWithKey(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) {
		ctx := context.Background()
		st := NewStore(g)
		iss := NewIssuer(st, DeriveSigningKey("k"), time.Hour)
		k, secret, err := st.Create(ctx, "console", RoleViewer, "flytesnacks", "development")
		if err != nil {
			t.Fatal(err)
		}
		enc, _ := Encode("flyte.example.com", k.KeyID, secret)
		wrongEnc, _ := Encode("flyte.example.com", k.KeyID, secret[1:])
		for _, pasted := range []string{enc, " " + k.KeyID + ":" + secret + "\n"} {
			id, p, err := iss.SignIn(ctx, pasted)
			if err != nil || id != k.KeyID || p.Subject != "apikey:"+k.KeyID || p.Bindings[0].Role != RoleViewer {
				t.Fatalf("SignIn(%q) = %q %+v %v", pasted, id, p, err)
			}
		}
		for _, bad := range []string{"", k.KeyID, k.KeyID + ":wrong", "nokey:" + secret, wrongEnc} {
			if _, _, err := iss.SignIn(ctx, bad); !errors.Is(err, authn.ErrBadCredential) {
				t.Errorf("SignIn(%q): %v, want ErrBadCredential", bad, err)
			}
		}
		if p, err := iss.KeyPrincipal(ctx, k.KeyID); err != nil || p.Name != "console" {
			t.Fatalf("KeyPrincipal: %+v %v", p, err)
		}
		if err := st.Revoke(ctx, k.KeyID); err != nil {
			t.Fatal(err)
		}
		if _, err := iss.KeyPrincipal(ctx, k.KeyID); !errors.Is(err, authn.ErrBadCredential) {
			t.Errorf("KeyPrincipal of a revoked key: %v", err)
		}
	})
}
