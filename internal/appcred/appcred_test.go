package appcred

import (
	"context"
	"errors"
	"strings"
	"testing"

	"fmgr.dev/internal/authn"
)

// An app's credential is the app with contributor on its own project and
// domain only, while the app is alive; a forged, altered or other kind of
// credential, or one of an app deleted or stopped, is ErrBadCredential; a
// failing liveness check is an error the caller may retry.
func TestAppCredential(t *testing.T) {
	ctx := context.Background()
	alive := map[string]bool{"web": true}
	var down error
	k := DeriveKey("signing", func(_ context.Context, a App) (bool, error) { return alive[a.Name], down })
	web := k.Mint(App{Project: "p", Domain: "development", Name: "web"})
	p, err := k.Verify(ctx, web)
	if err != nil || p.Subject != "app:p/development/web" || p.Kind != authn.KindApp ||
		len(p.Bindings) != 1 || p.Bindings[0] != (authn.Binding{Role: "contributor", Project: "p", Domain: "development"}) {
		t.Fatalf("app credential: %+v, %v", p, err)
	}
	other := DeriveKey("another manager", nil).Mint(App{Project: "p", Domain: "development", Name: "web"})
	body, sig, _ := strings.Cut(strings.TrimPrefix(web, Prefix), ".")
	adminBody, _, _ := strings.Cut(strings.TrimPrefix(k.Mint(App{Project: "*", Domain: "*", Name: "web"}), Prefix), ".")
	altered := Prefix + adminBody + "." + sig // another payload under web's signature
	for name, c := range map[string]string{
		"another key":  other,
		"altered":      altered,
		"task":         "fmr1.abc.def",
		"stopped app":  k.Mint(App{Project: "p", Domain: "development", Name: "gone"}),
		"empty":        "",
		"prefix only":  Prefix,
		"no signature": Prefix + body,
	} {
		if _, err := k.Verify(ctx, c); !errors.Is(err, authn.ErrBadCredential) {
			t.Errorf("%s: %v, want ErrBadCredential", name, err)
		}
	}
	alive["web"] = false
	if _, err := k.Verify(ctx, web); !errors.Is(err, authn.ErrBadCredential) {
		t.Errorf("a stopped app's credential: %v, want ErrBadCredential", err)
	}
	down = errors.New("database is closed")
	if _, err := k.Verify(ctx, web); err == nil || errors.Is(err, authn.ErrBadCredential) {
		t.Errorf("liveness unknown: %v, want a retryable error", err)
	}
}
