// Package taskcred is the credential an attempt's task process calls the
// API with when auth.mode is required: a bearer token naming the attempt's
// run, HMAC-signed with a key derived from the manager's signing key, so
// nothing is stored. It authenticates a principal of kind authn.KindTask,
// whose calls internal/authz limits to its own run (authz.AllowedTask).
package taskcred

import (
	"context"
	"strings"
	"time"

	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/signedclaims"
)

// Prefix starts every task credential (the manager's API-key tokens start
// with "fmt1.").
const Prefix = "fmr1."

// Key signs and verifies task credentials.
type Key struct {
	claims signedclaims.Key
	now    func() time.Time
}

// DeriveKey derives the credential key from the manager's signing key
// (storage.signingKey), separated from its other uses.
func DeriveKey(managerKey string) *Key {
	return &Key{claims: signedclaims.Derive(managerKey, "flyte-manager task credential v1", Prefix), now: time.Now}
}

type claims struct {
	Org     string `json:"o,omitempty"`
	Project string `json:"p"`
	Domain  string `json:"d"`
	Run     string `json:"r"`
	Action  string `json:"a,omitempty"`
	Exp     int64  `json:"e"`
}

// Mint returns the credential of an attempt of action in run, valid until
// expires.
func (k *Key) Mint(run authn.RunScope, action string, expires time.Time) string {
	return k.claims.Mint(claims{Org: run.Org, Project: run.Project, Domain: run.Domain, Run: run.Run, Action: action, Exp: expires.Unix()})
}

// Is reports whether credential has the form of a task credential (valid
// or not): a verifier chain hands it to Verify and to nothing else.
func Is(credential string) bool { return strings.HasPrefix(credential, Prefix) }

// Verify returns the principal of a task credential: authn.ErrBadCredential
// when it is malformed, forged or expired.
func (k *Key) Verify(_ context.Context, credential string) (authn.Principal, error) {
	var c claims
	if !k.claims.Open(credential, &c) || k.now().Unix() >= c.Exp || c.Project == "" || c.Domain == "" || c.Run == "" {
		return authn.Principal{}, authn.ErrBadCredential
	}
	run := authn.RunScope{Org: c.Org, Project: c.Project, Domain: c.Domain, Run: c.Run}
	return authn.Principal{
		Subject: "task:" + c.Project + "/" + c.Domain + "/" + c.Run,
		Name:    "task " + c.Action + " of run " + c.Run,
		Kind:    authn.KindTask,
		Run:     run,
	}, nil
}

// Chain is the verifier of auth.mode required: task credentials go to
// Tasks, everything else to Next (API keys and their tokens).
type Chain struct {
	Tasks *Key
	Next  authn.Verifier
}

// Verify implements authn.Verifier.
func (c Chain) Verify(ctx context.Context, credential string) (authn.Principal, error) {
	if Is(credential) {
		return c.Tasks.Verify(ctx, credential)
	}
	return c.Next.Verify(ctx, credential)
}
