package server

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"

	"fmgr.dev/internal/config"
	"fmgr.dev/internal/requrl"
)

// The manager has no authentication yet, so anyone whose request it serves
// can run commands through CreateRun. hostGuard makes sure those requests
// come from clients that meant to talk to this manager:
//
//   - The Host must be one the manager is known by. A web page that rebinds
//     its own name to 127.0.0.1 (DNS rebinding) reaches the port, but its
//     requests carry that name as Host and are refused. Known are: loopback
//     names and addresses and the address the connection arrived on (so task
//     processes at 127.0.0.1:<port> and kubelet probes at <pod IP>:<port>
//     pass), each on the bound port or without a port; externalURL's host;
//     server.allowedHosts. Host-less (HTTP/1.0) requests are refused too.
//   - A request with an Origin header comes from a browser page. It passes
//     only when the page is the manager's own (the Origin names the Host the
//     request was sent to, or externalURL) or is listed in
//     server.cors.allowedOrigins, which also gets CORS answers. Without this
//     any page could POST to http://localhost:8090 (a "simple" request
//     needs no preflight and still has its effect).
//
// Every route is guarded, /healthz, /readyz and /metrics included: probes
// address the pod IP, which is the connection's own address, and what
// /readyz reports (dependency errors) is no business of other web pages.
type hostGuard struct {
	patterns []requrl.HostPattern
	// external is externalURL's origin; zero when none is configured.
	external requrl.Origin
	origins  map[string]bool // normalized server.cors.allowedOrigins
	// port is the configured port, for requests that carry no local
	// address (a Handler used without the listener).
	port string
	log  *slog.Logger
}

func newHostGuard(cfg config.Server, log *slog.Logger) *hostGuard {
	g := &hostGuard{origins: map[string]bool{}, port: strconv.Itoa(cfg.Port), log: log}
	for _, h := range cfg.AllowedHosts {
		p, err := requrl.ParseHostPattern(h)
		if err != nil { // config.Validate has reported it already
			log.Error("ignoring server.allowedHosts entry", "entry", h, "error", err)
			continue
		}
		g.patterns = append(g.patterns, p)
	}
	if cfg.ExternalURL != "" {
		if u, err := url.Parse(cfg.ExternalURL); err == nil {
			if o, err := requrl.ParseOrigin(u.Scheme + "://" + u.Host); err == nil {
				g.external = o
			}
		}
	}
	for _, o := range cfg.CORS.AllowedOrigins {
		if parsed, err := requrl.ParseOrigin(o); err == nil {
			g.origins[parsed.String()] = true
		} else {
			log.Error("ignoring server.cors.allowedOrigins entry", "entry", o, "error", err)
		}
	}
	return g
}

// Headers a browser may send and read on a cross-origin call: what Connect,
// gRPC-Web and the signed blob routes use.
const (
	corsAllowMethods  = "GET, POST, PUT"
	corsAllowHeaders  = "Content-Type, Content-Encoding, Accept-Encoding, Connect-Protocol-Version, Connect-Timeout-Ms, Connect-Accept-Encoding, Connect-Content-Encoding, Grpc-Timeout, Grpc-Accept-Encoding, Grpc-Encoding, X-Grpc-Web, X-User-Agent, X-Request-Id, Content-Md5"
	corsExposeHeaders = "Grpc-Status, Grpc-Message, Grpc-Status-Details-Bin, Grpc-Encoding, Grpc-Accept-Encoding, Connect-Content-Encoding, Connect-Accept-Encoding, Content-Encoding, Content-Length"
	corsMaxAge        = "7200"
)

func (g *hostGuard) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, port, ok := requrl.SplitHost(r.Host)
		if !ok || !g.knownHost(r, host, port) {
			g.log.WarnContext(r.Context(), "refused request for an unknown Host", "host", r.Host, "remote", r.RemoteAddr, "path", r.URL.Path)
			forbid(w, fmt.Sprintf("this manager does not answer to Host %q: if clients reach it by that name, add it to server.allowedHosts", r.Host))
			return
		}
		origin := r.Header.Get("Origin")
		if origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		o, err := requrl.ParseOrigin(origin)
		own := err == nil && (o.SameHost(host, port) || o == g.external)
		listed := err == nil && g.origins[o.String()]
		if !own && !listed {
			g.log.WarnContext(r.Context(), "refused a cross-origin request", "origin", origin, "host", r.Host, "path", r.URL.Path)
			forbid(w, fmt.Sprintf("requests from origin %q are not allowed: to let its pages call this manager, add it to server.cors.allowedOrigins", origin))
			return
		}
		if listed {
			h := w.Header()
			h.Add("Vary", "Origin")
			h.Set("Access-Control-Allow-Origin", o.String())
			if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				h.Add("Vary", "Access-Control-Request-Method")
				h.Add("Vary", "Access-Control-Request-Headers")
				h.Set("Access-Control-Allow-Methods", corsAllowMethods)
				h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
				h.Set("Access-Control-Max-Age", corsMaxAge)
				w.WriteHeader(http.StatusNoContent)
				return
			}
			h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		}
		next.ServeHTTP(w, r)
	})
}

// knownHost applies the Host rules described on hostGuard.
func (g *hostGuard) knownHost(r *http.Request, host, port string) bool {
	for _, p := range g.patterns {
		if p.Match(host, port) {
			return true
		}
	}
	if g.external.Host != "" && host == g.external.Host && (port == "" || g.external.SameHost(host, port)) {
		return true
	}
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	boundPort, localIP := g.port, net.IP(nil)
	if tcp, ok := local.(*net.TCPAddr); ok {
		boundPort, localIP = strconv.Itoa(tcp.Port), tcp.IP
	}
	if port != "" && port != boundPort {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && (ip.IsLoopback() || ip.Equal(localIP))
}

func forbid(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusForbidden)
	_, _ = fmt.Fprintln(w, msg)
}
