package server

import (
	"context"
	"net/http"
	"strings"
)

type baseURLKey struct{}

// BaseURL is the URL the client reached this server at, for answers that
// must point back to it (SelectCluster, signed URLs): server.externalURL when
// configured, else the scheme and Host of the request.
func BaseURL(ctx context.Context) string {
	u, _ := ctx.Value(baseURLKey{}).(string)
	return u
}

func withBaseURL(external string, next http.Handler) http.Handler {
	external = strings.TrimRight(external, "/")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		base := external
		if base == "" {
			scheme := "http"
			if r.TLS != nil {
				scheme = "https"
			}
			if p := strings.ToLower(r.Header.Get("X-Forwarded-Proto")); p == "http" || p == "https" {
				scheme = p
			}
			base = scheme + "://" + r.Host
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), baseURLKey{}, base)))
	})
}
