// Package requrl remembers, per request, the base URL the client used to reach
// the manager (scheme + Host), so handlers can hand back absolute URLs (signed
// blob URLs, SelectCluster's endpoint) that the same client can reach. It
// also normalizes and matches Hosts and Origins (hosts.go), for the server's
// Host guard, which decides which base URLs are acceptable at all, and for
// the configuration's checks of server.allowedHosts and CORS origins.
package requrl

import (
	"context"
	"net/http"
	"strings"
)

type key struct{}

// Middleware stores the request's base URL in its context. When external is
// set (the manager runs behind a proxy), it wins over what the request says.
func Middleware(external string, next http.Handler) http.Handler {
	external = strings.TrimRight(external, "/")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		base := external
		if base == "" {
			base = FromRequest(r)
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), key{}, base)))
	})
}

// FromRequest derives scheme://host from the request itself.
func FromRequest(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// BaseURL returns the base URL stored by Middleware, or "" outside a request.
func BaseURL(ctx context.Context) string {
	s, _ := ctx.Value(key{}).(string)
	return s
}

// WithBaseURL is for callers (tests, background work) that know the base URL.
func WithBaseURL(ctx context.Context, base string) context.Context {
	return context.WithValue(ctx, key{}, strings.TrimRight(base, "/"))
}
