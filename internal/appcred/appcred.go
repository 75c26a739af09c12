// Package appcred is the credential an app's replicas call the API with
// when auth.mode is required: a bearer token naming the app (its org,
// project, domain and name), HMAC-signed with a key derived from the
// manager's signing key, so nothing is stored. It authenticates a
// principal of kind authn.KindApp whose one role is contributor on the
// app's own project and domain: the app may start, watch and abort runs
// and read what a contributor reads there, and nothing elsewhere; never
// admin, never the manager's internal procedures (internal/authz refuses
// them to everyone but tasks). It is valid while the app exists and is not
// stopped (Alive), so deleting or stopping an app revokes it at once.
package appcred

import (
	"context"
	"fmt"

	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/signedclaims"
)

// Prefix starts every app credential (task credentials start with "fmr1.",
// API-key tokens with "fmt1.").
const Prefix = "fma1."

// authzAny is the wildcard of bindings, which no app's project or domain
// is (a credential naming it would bind every project).
const authzAny = "*"

// Role is the one role an app's credential has, on its own project and
// domain.
const Role = "contributor"

// App names one app.
type App struct {
	Org     string `json:"o,omitempty"`
	Project string `json:"p"`
	Domain  string `json:"d"`
	Name    string `json:"n"`
}

// Alive reports whether app exists and is not stopped; an error is one the
// caller may retry (the database is down).
type Alive func(ctx context.Context, app App) (bool, error)

// Key signs and verifies app credentials.
type Key struct {
	claims signedclaims.Key
	alive  Alive
}

// DeriveKey derives the credential key from the manager's signing key
// (storage.signingKey), separated from its other uses; alive decides
// whether a well-signed credential's app may still call.
func DeriveKey(managerKey string, alive Alive) *Key {
	return &Key{claims: signedclaims.Derive(managerKey, "flyte-manager app credential v1", Prefix), alive: alive}
}

// Mint returns app's credential.
func (k *Key) Mint(app App) string { return k.claims.Mint(app) }

// Verify implements authn.Verifier: the principal of an app credential,
// authn.ErrBadCredential for anything else (another kind of credential, a
// forged one, or one of an app deleted or stopped since).
func (k *Key) Verify(ctx context.Context, credential string) (authn.Principal, error) {
	var app App
	if !k.claims.Open(credential, &app) || app.Project == "" || app.Domain == "" || app.Name == "" ||
		app.Project == authzAny || app.Domain == authzAny {
		return authn.Principal{}, authn.ErrBadCredential
	}
	if k.alive != nil {
		live, err := k.alive(ctx, app)
		if err != nil {
			return authn.Principal{}, fmt.Errorf("checking app %s/%s/%s: %w", app.Project, app.Domain, app.Name, err)
		}
		if !live {
			return authn.Principal{}, fmt.Errorf("%w: app %s/%s/%s is deleted or stopped", authn.ErrBadCredential, app.Project, app.Domain, app.Name)
		}
	}
	return authn.Principal{
		Subject:  "app:" + app.Project + "/" + app.Domain + "/" + app.Name,
		Name:     "app " + app.Name,
		Kind:     authn.KindApp,
		Bindings: []authn.Binding{{Role: Role, Project: app.Project, Domain: app.Domain}},
	}, nil
}
