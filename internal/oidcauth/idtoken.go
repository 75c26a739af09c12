package oidcauth

import (
	"context"
	"fmt"
	"slices"

	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/config"
)

// Identity is who an ID token names: what a console session keeps, so the
// session's roles come from auth.bindings as a token's do.
type Identity struct {
	Subject string   `json:"sub"`
	Name    string   `json:"name,omitempty"`
	Groups  []string `json:"groups,omitempty"`
}

// VerifyIDToken verifies an ID token the provider issued to clientID at a
// sign-in that sent nonce: the provider's signature, unexpired, clientID
// among its audiences and the nonce claim equal to nonce. It answers
// ErrBadCredential (wrapped) for a token that fails any check.
func (v *Verifier) VerifyIDToken(ctx context.Context, raw, clientID, nonce string) (Identity, error) {
	if !looksLikeJWT(raw) {
		return Identity{}, fmt.Errorf("%w: the provider sent no ID token", authn.ErrBadCredential)
	}
	if _, err := v.disc.Endpoints(ctx); err != nil {
		return Identity{}, err
	}
	tok, err := v.verifier.Verify(ctx, raw)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %v", authn.ErrBadCredential, err)
	}
	if !slices.Contains(tok.Audience, clientID) {
		return Identity{}, fmt.Errorf("%w: the ID token is for %v, not client %q", authn.ErrBadCredential, tok.Audience, clientID)
	}
	if nonce == "" || tok.Nonce != nonce {
		return Identity{}, fmt.Errorf("%w: the ID token's nonce is not this sign-in's", authn.ErrBadCredential)
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return Identity{}, fmt.Errorf("%w: %v", authn.ErrBadCredential, err)
	}
	subject, _ := claims[v.cfg.SubjectClaim].(string)
	if subject == "" {
		return Identity{}, fmt.Errorf("%w: the ID token has no %q claim", authn.ErrBadCredential, v.cfg.SubjectClaim)
	}
	return Identity{Subject: subject, Name: displayName(claims, subject), Groups: stringsClaim(claims[v.cfg.GroupsClaim])}, nil
}

// Principal is the principal of id, with the roles auth.bindings give it
// now (as Verify gives a token's subject; a person, so no client binding).
func (v *Verifier) Principal(id Identity) authn.Principal {
	return authn.Principal{Subject: "user:" + id.Subject, Name: id.Name, Kind: authn.KindUser, Bindings: v.bind(id.Subject, id.Groups, "")}
}

// BoundGroups is those of groups that some binding of auth.bindings names:
// all a session needs to keep of a person's groups when there are too many
// for a cookie.
func (v *Verifier) BoundGroups(groups []string) []string {
	var out []string
	for _, g := range groups {
		if slices.ContainsFunc(v.bindings, func(b config.AuthBinding) bool { return b.Group == g }) {
			out = append(out, g)
		}
	}
	return out
}
