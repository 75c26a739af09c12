package apikey

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"

	"fmgr.dev/internal/authn"
)

// SignIn checks a key pasted into the console's sign-in page, in the
// FLYTE_API_KEY format or as "<key id>:<secret>", and answers the key's
// id and principal; authn.ErrBadCredential when it is not an active key.
func (i *Issuer) SignIn(ctx context.Context, pasted string) (keyID string, p authn.Principal, err error) {
	id, secret, ok := splitPasted(strings.TrimSpace(pasted))
	if !ok {
		return "", authn.Principal{}, authn.ErrBadCredential
	}
	k, err := i.checkSecret(ctx, id, secret)
	if err != nil {
		return "", authn.Principal{}, err
	}
	return k.KeyID, principal(k), nil
}

// KeyPrincipal is the principal of the active key keyID, read now (a
// console session checks its key on every request, so revoking the key
// ends the session at once); authn.ErrBadCredential when it is unknown or
// revoked.
func (i *Issuer) KeyPrincipal(ctx context.Context, keyID string) (authn.Principal, error) {
	k, err := i.store.active(ctx, keyID)
	if errors.Is(err, errNoKey) {
		return authn.Principal{}, authn.ErrBadCredential
	}
	if err != nil {
		return authn.Principal{}, err
	}
	return principal(k), nil
}

// splitPasted takes a key apart: base64("endpoint:id:secret:org") (what
// Encode makes) or "id:secret".
func splitPasted(s string) (id, secret string, ok bool) {
	if raw, err := base64.StdEncoding.DecodeString(s); err == nil {
		if parts := strings.SplitN(string(raw), ":", 4); len(parts) == 4 && strings.HasPrefix(parts[1], keyIDPrefix) {
			return parts[1], parts[2], parts[2] != ""
		}
	}
	id, secret, ok = strings.Cut(s, ":")
	return id, secret, ok && strings.HasPrefix(id, keyIDPrefix) && secret != ""
}
