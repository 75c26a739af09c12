package consoleauth

import (
	"context"
	"mime"
	"net/http"
	"strings"

	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/requrl"
)

// Header is the request header the console's scripts send with every call.
// A cross-site form cannot send it, and another origin's script that sets
// it needs a CORS preflight the manager does not grant, so a request that
// carries it (and the cookie) comes from the console's own page.
const Header = "X-Flyte-Console"

// consoleRequest reports whether h is the console's page calling: its
// header present, a JSON or protobuf body (no form, no text/plain), and
// if the browser names where the request comes from (Sec-Fetch-Site,
// Origin), the manager's own origin. It answers authn.ErrCrossSite when not.
func consoleRequest(ctx context.Context, h http.Header) error {
	if h.Get(Header) == "" {
		return authn.ErrCrossSite
	}
	if site := h.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return authn.ErrCrossSite
	}
	if ct := h.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !strings.HasPrefix(mt, "application/") || mt == "application/x-www-form-urlencoded" {
			return authn.ErrCrossSite
		}
	}
	if o := h.Get("Origin"); o != "" && !sameOrigin(ctx, o) {
		return authn.ErrCrossSite
	}
	return nil
}

// sameOrigin reports whether origin is the manager's own, as the request
// reached it (or the configured external URL).
func sameOrigin(ctx context.Context, origin string) bool {
	got, err := requrl.ParseOrigin(origin)
	if err != nil {
		return false
	}
	own, err := requrl.ParseOrigin(requrl.BaseURL(ctx))
	return err == nil && got == own
}

// browserRead reports whether h is a read the console's page makes (its
// header) or the browser makes from the console's origin or on its user's
// own: a link opened in a new tab is same-origin, a typed address "none";
// another site's link, image or frame is cross-site and refused. Browsers
// that send no Sec-Fetch-Site need the console's header.
func browserRead(ctx context.Context, h http.Header) error {
	if h.Get(Header) != "" {
		return consoleRequest(ctx, h)
	}
	switch h.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
	default:
		return authn.ErrCrossSite
	}
	if o := h.Get("Origin"); o != "" && !sameOrigin(ctx, o) {
		return authn.ErrCrossSite
	}
	return nil
}
