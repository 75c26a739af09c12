package taskcred

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"fmgr.dev/internal/authn"
)

type refuseAll struct{}

func (refuseAll) Verify(context.Context, string) (authn.Principal, error) {
	return authn.Principal{Subject: "next"}, nil
}

func TestMintVerify(t *testing.T) {
	k := DeriveKey("manager-key")
	now := time.Unix(1_700_000_000, 0)
	k.now = func() time.Time { return now }
	run := authn.RunScope{Org: "o", Project: "p", Domain: "d", Run: "r1"}
	tok := k.Mint(run, "a0", now.Add(time.Minute))
	if !Is(tok) {
		t.Fatalf("%q does not look like a task credential", tok)
	}
	p, err := k.Verify(context.Background(), tok)
	if err != nil || p.Kind != authn.KindTask || p.Run != run || p.Subject != "task:p/d/r1" || len(p.Bindings) != 0 {
		t.Fatalf("Verify = %+v, %v", p, err)
	}
	body, sig, _ := strings.Cut(strings.TrimPrefix(tok, Prefix), ".")
	forged := DeriveKey("another-key").Mint(run, "a0", now.Add(time.Minute))
	for name, bad := range map[string]string{
		"other key":      forged,
		"bad signature":  Prefix + body + "." + sig[:len(sig)-2] + "AA",
		"no signature":   Prefix + body,
		"garbage":        Prefix + "!!.!!",
		"empty run":      k.Mint(authn.RunScope{Project: "p", Domain: "d"}, "a0", now.Add(time.Minute)),
		"expired":        k.Mint(run, "a0", now),
		"swapped claims": Prefix + strings.TrimPrefix(strings.Split(k.Mint(authn.RunScope{Project: "p", Domain: "d", Run: "r2"}, "a0", now.Add(time.Minute)), ".")[1], "") + "." + sig,
	} {
		if _, err := k.Verify(context.Background(), bad); !errors.Is(err, authn.ErrBadCredential) {
			t.Errorf("%s: Verify err = %v, want ErrBadCredential", name, err)
		}
	}
	c := Chain{Tasks: k, Next: refuseAll{}}
	if p, err := c.Verify(context.Background(), forged); !errors.Is(err, authn.ErrBadCredential) {
		t.Errorf("chain passed a forged task credential on: %+v %v", p, err)
	}
	if p, _ := c.Verify(context.Background(), "fmt1.x.y"); p.Subject != "next" {
		t.Errorf("chain did not hand an API-key token to the next verifier: %+v", p)
	}
}
