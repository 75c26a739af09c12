// Package console serves the web console: a single-page application of
// plain ES modules under web/, embedded in the binary, that talks to the
// manager only through the public Connect API (Connect JSON over fetch),
// exactly as any other client does.
//
// Assets live under /v2/assets/; every other path under /v2/ answers the
// application's index.html, so a console link (the SDK prints them) opens
// the right view on a fresh load; the browser-side router reads the path.
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"

	"fmgr.dev/internal/server"
)

//go:embed web
var embedded embed.FS

// BasePath is where the console lives, as in the official console's links.
const BasePath = "/v2/"

// contentSecurityPolicy allows nothing but the console's own assets and
// calls to its own origin: no inline script, no eval, no other origin. A
// user string that slipped into the page as markup still could not run.
// Reports are framed from the manager's blob route (same origin) and are
// sandboxed by the iframe attribute and by the header their route sends.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; frame-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Setup serves the console at /v2/ and sends browsers that open the bare
// origin there.
func Setup(srv *server.Server) error {
	web, err := fs.Sub(embedded, "web")
	if err != nil {
		return err
	}
	h := &handler{files: web, static: http.FileServerFS(web)}
	return srv.Handle(
		server.Route{Pattern: "GET /{$}", Handler: http.RedirectHandler(BasePath, http.StatusFound)},
		server.Route{Pattern: "GET /v2", Handler: http.RedirectHandler(BasePath, http.StatusMovedPermanently)},
		server.Route{Pattern: "GET " + BasePath, Handler: h},
	)
}

// SetupApp serves BasePath (and the bare /v2) with app instead of the
// built-in console, for every method (an app's pages may post to
// themselves), and sends browsers that open the bare origin there. app is
// the manager's proxy to the app configured as console.app.
func SetupApp(srv *server.Server, app http.Handler) error {
	return srv.Handle(
		server.Route{Pattern: "GET /{$}", Handler: http.RedirectHandler(BasePath, http.StatusFound)},
		server.Route{Pattern: strings.TrimSuffix(BasePath, "/"), Handler: app},
		server.Route{Pattern: BasePath, Handler: app},
	)
}

type handler struct {
	files  fs.FS
	static http.Handler
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setSecurityHeaders(w.Header())
	name := strings.TrimPrefix(r.URL.Path, BasePath)
	if strings.HasPrefix(name, assetDir) {
		if _, err := fs.Stat(h.files, name); err != nil {
			http.NotFound(w, r)
			return
		}
		// Assets are not fingerprinted: revalidate so a new binary's
		// console is what the next load gets.
		w.Header().Set("Cache-Control", "no-cache")
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + name
		h.static.ServeHTTP(w, r2)
		return
	}
	index, err := fs.ReadFile(h.files, "index.html")
	if err != nil {
		http.Error(w, "console assets missing from this build", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(index)
}

// assetDir holds every file the page loads. Views get the index whatever
// their path looks like: a task's name has dots in it.
const assetDir = "assets/"

func setSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}
