package apikey

import (
	"context"
	"testing"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/internal/config"
	"fmgr.dev/internal/dbtest"
)

// A provided bootstrap key is stored once as an admin key on everything,
// authenticates, survives further starts unchanged, and stays revoked once
// revoked; malformed values are refused.
func TestBootstrapKey(t *testing.T) {
	for _, bad := range []string{"", "fmk123", "abc12345678:" + string(make([]byte, 40)), "fmkabcdefgh:short", "fmkabcdefgh:has:a-colon-in-it-xxxxxxxxxxxxxxxxxxxx"} {
		if _, _, err := config.ParseBootstrapKey(bad); err == nil {
			t.Errorf("ParseBootstrapKey(%q) accepted", bad)
		}
	}
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) {
		ctx := context.Background()
		st := NewStore(g)
		iss := NewIssuer(st, DeriveSigningKey("k"), time.Hour)
		id, secret, err := config.ParseBootstrapKey("fmk0123456789abcdef:abcdefghijklmnopqrstuvwxyz0123456789_-AB")
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []bool{true, false} {
			if stored, err := st.EnsureBootstrap(ctx, id, secret); err != nil || stored != want {
				t.Fatalf("start %d: stored %v, %v; want %v", i, stored, err, want)
			}
		}
		p, err := iss.Verify(ctx, id+":"+secret)
		if err != nil {
			t.Fatalf("the bootstrap key does not authenticate: %v", err)
		}
		keys, _ := st.List(ctx)
		if len(keys) != 1 || keys[0].Role != RoleAdmin || keys[0].Project != Any || keys[0].Domain != Any || keys[0].Name != BootstrapName {
			t.Fatalf("stored %+v (principal %+v)", keys, p)
		}
		if err := st.Revoke(ctx, id); err != nil {
			t.Fatal(err)
		}
		if stored, err := st.EnsureBootstrap(ctx, id, secret); err != nil || stored {
			t.Fatalf("a revoked bootstrap key came back: %v %v", stored, err)
		}
		if _, err := iss.Verify(ctx, id+":"+secret); err == nil {
			t.Error("the revoked bootstrap key still authenticates")
		}
	})
}
