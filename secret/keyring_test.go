package secret_test

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gorm.io/gorm"

	"fmgr.dev/internal/config"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/secret"
)

var ad = []byte("scope and name")

// With no key configured, the keyring is generated into the data dir on
// first start (0600) and reused by every later start.
func TestKeyringGenerated(t *testing.T) {
	home := t.TempDir()
	k1, err := secret.OpenKeyring(config.Secrets{}, home)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(filepath.Join(home, config.SecretsKeyringFile))
	if err != nil || info.Mode().Perm() != 0o600 || !k1.Generated() {
		t.Fatalf("keyring file: %v, %v (generated %v); want mode 0600", info, err, k1.Generated())
	}
	id, blob, err := k1.Seal(ad, []byte("value"))
	if err != nil {
		t.Fatal(err)
	}
	k2, err := secret.OpenKeyring(config.Secrets{}, home)
	if err != nil || k2.Generated() {
		t.Fatalf("a later start: %v, generated %v", err, k2.Generated())
	}
	if v, err := k2.Open(id, ad, blob); err != nil || string(v) != "value" {
		t.Fatalf("a later start opens %q, %v", v, err)
	}
	if _, err := k2.Open(id, []byte("another secret"), blob); err == nil {
		t.Fatal("a value opened under another secret's additional data")
	}
}

// A keyring file named explicitly is never generated: a typo must not
// make every stored value unreadable.
func TestKeyringExplicitFileMustExist(t *testing.T) {
	_, err := secret.OpenKeyring(config.Secrets{KeyFile: filepath.Join(t.TempDir(), "typo.keyring")}, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "typo.keyring") {
		t.Fatalf("err = %v, want the missing file named", err)
	}
}

// secrets.key is one fixed key whose id every replica derives alike; the
// id does not show the key.
func TestKeyringFixedKey(t *testing.T) {
	raw := make([]byte, 32)
	for i := range raw {
		raw[i] = byte(i)
	}
	cfg := config.Secrets{Key: base64.StdEncoding.EncodeToString(raw)}
	a, err := secret.OpenKeyring(cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := secret.OpenKeyring(cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	id, blob, err := a.Seal(ad, []byte("value"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(id, "cfg-") || strings.Contains(id, cfg.Key) {
		t.Errorf("key id %q", id)
	}
	if v, err := b.Open(id, ad, blob); err != nil || string(v) != "value" {
		t.Fatalf("another replica opens %q, %v", v, err)
	}
	if _, err := secret.Rotate(context.Background(), nil, cfg, t.TempDir()); err == nil || !strings.Contains(err.Error(), "secrets.keyFile") {
		t.Fatalf("rotating a fixed key: %v, want a refusal pointing at secrets.keyFile", err)
	}
}

// rotate-key seals every value again under a new key and retires the old
// one, while a running manager (a keyring opened before) keeps reading
// every value and seals new ones under the new key, without a restart.
func TestRotateKey(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) {
		ctx := context.Background()
		home := t.TempDir()
		running, err := secret.OpenKeyring(config.Secrets{}, home)
		if err != nil {
			t.Fatal(err)
		}
		st := secret.NewStore(g, running)
		scope := secret.Scope{Domain: "development", Project: "flytesnacks"}
		names := []string{"a", "b", "c"}
		for _, n := range names {
			if err := st.Create(ctx, secret.ID{Scope: scope, Name: n}, 0, []byte("value-"+n)); err != nil {
				t.Fatal(err)
			}
		}
		oldID, err := running.ActiveID()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(home, config.SecretsKeyringFile)
		before, _ := os.ReadFile(path)

		rot, err := secret.Rotate(ctx, g, config.Secrets{}, home)
		if err != nil {
			t.Fatal(err)
		}
		if rot.Resealed != len(names) || rot.NewKeyID == oldID || len(rot.Retired) != 1 || rot.Retired[0] != oldID {
			t.Fatalf("rotation %+v, want %d values resealed and %s retired", rot, len(names), oldID)
		}
		keys, err := secret.ReadKeyringFile(path)
		if err != nil || len(keys) != 1 || keys[0].ID != rot.NewKeyID {
			t.Fatalf("keyring after rotation: %v, %v", keys, err)
		}
		after, _ := os.ReadFile(path)
		oldLine := strings.Split(strings.TrimSpace(string(before)), "\n")[1]
		if strings.Contains(string(after), strings.Fields(oldLine)[1]) {
			t.Fatal("the retired key is still in the keyring file")
		}
		var ids []string
		if err := g.Raw("SELECT DISTINCT key_id FROM secrets").Scan(&ids).Error; err != nil {
			t.Fatal(err)
		}
		if len(ids) != 1 || ids[0] != rot.NewKeyID {
			t.Fatalf("key ids in the table %v, want only %s", ids, rot.NewKeyID)
		}

		// The running manager, never restarted.
		for _, n := range names {
			v, ok, err := st.Resolve(ctx, scope, n)
			if err != nil || !ok || string(v) != "value-"+n {
				t.Fatalf("after rotation %s = %q %v %v", n, v, ok, err)
			}
		}
		if err := st.Create(ctx, secret.ID{Scope: scope, Name: "d"}, 0, []byte("value-d")); err != nil {
			t.Fatal(err)
		}
		var newest string
		if err := g.Raw("SELECT key_id FROM secrets WHERE name = 'd'").Scan(&newest).Error; err != nil {
			t.Fatal(err)
		}
		if newest != rot.NewKeyID {
			t.Fatalf("a value written after the rotation is under %s, want %s", newest, rot.NewKeyID)
		}
	})
}
