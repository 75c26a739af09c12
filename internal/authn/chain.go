package authn

import (
	"context"
	"errors"
)

// KindUser is a person signed in at an identity provider (internal/oidcauth).
const KindUser = "user"

// KindApp is an app's replicas (internal/appcred).
const KindApp = "app"

// Verifiers asks each verifier in turn: the first that does not answer
// ErrBadCredential decides. Each verifier refuses a credential of a shape
// it does not issue (a JWT, an API key token) with ErrBadCredential
// without further work, so the order only costs that check.
type Verifiers []Verifier

// Verify implements Verifier.
func (vs Verifiers) Verify(ctx context.Context, credential string) (Principal, error) {
	for _, v := range vs {
		p, err := v.Verify(ctx, credential)
		if errors.Is(err, ErrBadCredential) {
			continue
		}
		return p, err
	}
	return Principal{}, ErrBadCredential
}
