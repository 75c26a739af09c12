package oidcauth

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// signingAlgs are the algorithms a token may be signed with: asymmetric
// only ("none" and the HMAC family never verify).
var signingAlgs = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

func algNames() []string {
	out := make([]string, len(signingAlgs))
	for i, a := range signingAlgs {
		out[i] = string(a)
	}
	return out
}

// keySet is the provider's JWKS, fetched when a token names a key id it
// does not hold (the provider rotated its keys), at most once per
// minRefresh so tokens with made-up key ids cannot make the manager fetch
// on every request.
type keySet struct {
	disc       *Discovery
	minRefresh time.Duration
	now        func() time.Time

	mu        sync.Mutex
	keys      jose.JSONWebKeySet
	fetchedAt time.Time
	fetched   bool
}

var errUnknownKey = errors.New("the token's signing key is not in the provider's key set")

// VerifySignature implements go-oidc's KeySet: the payload of jwt when one
// of the provider's keys signed it.
func (k *keySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	jws, err := jose.ParseSigned(jwt, signingAlgs)
	if err != nil {
		return nil, err
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("the token must carry exactly one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	keys, err := k.lookup(ctx, kid)
	if err != nil {
		return nil, err
	}
	for _, key := range keys {
		if payload, err := jws.Verify(key); err == nil {
			return payload, nil
		}
	}
	return nil, errors.New("the token's signature does not verify")
}

// lookup returns the keys with id kid (every key when kid is empty),
// refetching the set once when it has none.
func (k *keySet) lookup(ctx context.Context, kid string) ([]jose.JSONWebKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fetched {
		if keys := k.match(kid); len(keys) > 0 {
			return keys, nil
		}
		if k.now().Sub(k.fetchedAt) < k.minRefresh {
			return nil, errUnknownKey
		}
	}
	if err := k.refresh(ctx); err != nil {
		return nil, err
	}
	if keys := k.match(kid); len(keys) > 0 {
		return keys, nil
	}
	return nil, errUnknownKey
}

func (k *keySet) match(kid string) []jose.JSONWebKey {
	if kid == "" {
		return k.keys.Keys
	}
	return k.keys.Key(kid)
}

func (k *keySet) refresh(ctx context.Context) error {
	doc, err := k.disc.Endpoints(ctx)
	if err != nil {
		return err
	}
	var set jose.JSONWebKeySet
	// Counted as a fetch even when it fails: the bound holds for an
	// unreachable provider too.
	k.fetchedAt, k.fetched = k.now(), true
	if err := getJSON(ctx, k.disc.client, doc.JWKS, &set); err != nil {
		return fmt.Errorf("%w: key set: %v", ErrProviderUnavailable, err)
	}
	k.keys = set
	return nil
}
