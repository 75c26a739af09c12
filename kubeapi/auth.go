package kubeapi

import (
	"context"
	"errors"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/authz"
	"fmgr.dev/internal/store"
)

// Who may call the API: a kubeconfig token (flyte-manager kubeconfig) sees
// and deletes everything; with auth.mode required, an API key or a token
// minted from one (Deps.Keys) sees the actions of the projects and domains
// its role allows (lists and watches filtered, others' objects not found)
// and deletes (aborts) where it may execute. Task credentials are refused.

// kubeProcedure names the API in authz decisions (it is no Connect
// procedure: a request naming no project needs a role on every project).
const kubeProcedure = "kubeapi"

// caller authenticates r: ok is false when it has answered (401, 503).
// A kubeconfig token leaves the context without a principal.
func (a *API) caller(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	if a.d.Tokens == nil {
		return r, true
	}
	token, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	token = strings.TrimSpace(token)
	if found && a.d.Tokens.Valid(token) {
		return r, true
	}
	unauthorized := func() (*http.Request, bool) {
		writeStatus(w, apierrors.NewUnauthorized("a valid bearer token is required (see flyte-manager kubeconfig, or an API key's token)").ErrStatus)
		return r, false
	}
	if !found || token == "" || a.d.Keys == nil {
		return unauthorized()
	}
	p, err := a.d.Keys.Verify(r.Context(), token)
	if errors.Is(err, authn.ErrBadCredential) || (err == nil && p.Kind == authn.KindTask) {
		return unauthorized()
	}
	if err != nil {
		a.d.Log.WarnContext(r.Context(), "could not verify a credential", "error", err)
		writeStatus(w, apierrors.NewServiceUnavailable("could not verify the credential now; retry").ErrStatus)
		return r, false
	}
	return r.WithContext(authn.WithPrincipal(r.Context(), p)), true
}

// may reports whether the caller of ctx may act (authz.View: see,
// authz.Execute: delete) on project/domain's actions.
func may(ctx context.Context, act authz.Action, project, domain string) bool {
	p, ok := authn.FromContext(ctx)
	return !ok || authz.Allowed(p.Bindings, kubeProcedure, act, project, domain)
}

// seen is row when the caller of ctx may see it, else nil.
func seen(ctx context.Context, row *store.Action) *store.Action {
	if row == nil || !may(ctx, authz.View, row.Project, row.Domain) {
		return nil
	}
	return row
}
