package appruntime

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"
)

// The manager serves every app at <its address><prefix>/<project>/<domain>/<name>/
// (prefix "/apps" by default), whichever runtime runs it: a request is
// forwarded to one of the app's ready backends with the prefix and the
// app's path removed (and X-Forwarded-Prefix set to them), balanced by
// requests in flight. A request that finds no ready backend (scaled to
// zero, starting) wakes the app and waits for one, up to the app's
// request timeout. An app that cannot serve (stopped, failed, another
// manager runs apps) answers what the runtime says (503 mostly); an
// unknown one 404.

// syncWait bounds a request's wait for a starting manager to know its apps.
const syncWait = 30 * time.Second

// Backend is one ready replica of an app, as the proxy reaches it.
type Backend struct {
	// Name names the replica (a process, a Pod); it keys the balancing.
	Name string
	// URL is where it serves: "http://10.1.2.3:8080".
	URL *url.URL
	// DialContext, when set, makes the connections to URL's host (a Unix
	// socket into the replica's network namespace, say); nil: TCP.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Unavailable is why an app cannot serve now: the HTTP status and the
// words for the client.
type Unavailable struct {
	Code    int
	Message string
}

func (e *Unavailable) Error() string { return e.Message }

// Served is what a runtime offers the proxy.
type Served interface {
	// Lookup finds the app served as project/domain/name (in any org: the
	// URL names none).
	Lookup(project, domain, name string) (Key, bool)
	// Backends are k's ready backends now, and a channel closed when they
	// (or whether the app can serve) may have changed; an *Unavailable
	// error when the app cannot serve.
	Backends(k Key) ([]Backend, <-chan struct{}, error)
	// Begin notes one request to k from its arrival (the runtime scales
	// by requests in flight and scales down after none for a while); the
	// proxy calls end when the request ended.
	Begin(k Key) (end func())
	// Wake notes a request waiting with no ready backend: the runtime
	// starts one (from zero). The proxy calls done when it stops waiting.
	Wake(k Key) (done func())
	// RequestTimeout bounds how long a request of k waits for a backend.
	RequestTimeout(k Key) time.Duration
}

// Forwarder is what a runtime implements besides Served to know which of
// its backends carry requests (to stop an idle one when it scales down).
type Forwarder interface {
	// Forward notes one request forwarded to k's backend named so until
	// done is called.
	Forward(k Key, backend string) (done func())
}

// Proxy serves a runtime's apps under a prefix.
type Proxy struct {
	apps   Served
	prefix string

	mu       sync.Mutex
	inflight map[Key]map[string]int             // per backend name
	dialed   map[Key]map[string]*http.Transport // backends with a DialContext
	plain    *http.Transport
	turn     int
}

// NewProxy returns the handler serving apps' requests under prefix ("/apps").
func NewProxy(apps Served, prefix string) *Proxy {
	plain := http.DefaultTransport.(*http.Transport).Clone()
	plain.Proxy = nil // an app's address is never reached through a proxy
	return &Proxy{
		apps:     apps,
		prefix:   "/" + strings.Trim(prefix, "/"),
		inflight: map[Key]map[string]int{},
		dialed:   map[Key]map[string]*http.Transport{},
		plain:    plain,
	}
}

// Pattern is the ServeMux pattern the proxy is mounted at.
func (p *Proxy) Pattern() string { return p.prefix + "/" }

// URL is the public URL of k under base (the manager's base URL).
func (p *Proxy) URL(base string, k Key) string {
	return strings.TrimSuffix(base, "/") + p.prefix + "/" + k.Project + "/" + k.Domain + "/" + k.Name + "/"
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	rest := strings.TrimPrefix(req.URL.Path, p.prefix+"/")
	parts := strings.SplitN(rest, "/", 4)
	if len(parts) < 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		http.Error(w, "apps are served at "+p.prefix+"/<project>/<domain>/<app name>/", http.StatusNotFound)
		return
	}
	if len(parts) == 3 {
		// The app's root without its slash: relative links need it.
		u := *req.URL
		u.Path += "/"
		http.Redirect(w, req, u.String(), http.StatusMovedPermanently)
		return
	}
	project, domain, name, path := parts[0], parts[1], parts[2], "/"+parts[3]
	if g, ok := p.apps.(Syncer); ok {
		// Just started: the apps are not all known yet.
		ctx, cancel := context.WithTimeout(req.Context(), syncWait)
		err := g.WaitSynced(ctx)
		cancel()
		if err != nil {
			w.Header().Set("Retry-After", "5")
			http.Error(w, "the manager is starting: its apps are not loaded yet", http.StatusServiceUnavailable)
			return
		}
	}
	k, ok := p.apps.Lookup(project, domain, name)
	if !ok {
		http.Error(w, fmt.Sprintf("no app %q in project %s, domain %s", name, project, domain), http.StatusNotFound)
		return
	}
	end := p.apps.Begin(k)
	defer end()
	b, rt, release, err := p.pick(req.Context(), k)
	if err != nil {
		var un *Unavailable
		if errors.As(err, &un) {
			w.Header().Set("Retry-After", "5")
			http.Error(w, un.Message, un.Code)
			return
		}
		http.Error(w, "the request ended while waiting for a replica", http.StatusServiceUnavailable)
		return
	}
	defer release()
	if f, ok := p.apps.(Forwarder); ok {
		defer f.Forward(k, b.Name)()
	}
	prefix := p.prefix + "/" + project + "/" + domain + "/" + name
	target := b.URL
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.URL.Path, pr.Out.URL.RawPath = strings.TrimSuffix(target.Path, "/")+path, ""
			pr.Out.Host = req.Host
			pr.SetXForwarded()
			pr.Out.Header.Set("X-Forwarded-Prefix", prefix)
		},
		Transport:     rt,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, fmt.Sprintf("app %s: its replica %s did not answer", name, b.Name), http.StatusBadGateway)
		},
	}
	proxy.ServeHTTP(w, req)
}

// pick returns a ready backend of k for one request, the transport that
// reaches it and the function that ends the request's use of it, waking
// the app and waiting when it has none.
func (p *Proxy) pick(ctx context.Context, k Key) (Backend, http.RoundTripper, func(), error) {
	timeout := p.apps.RequestTimeout(k)
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var stopWaiting func()
	defer func() {
		if stopWaiting != nil {
			stopWaiting()
		}
	}()
	for {
		backends, changed, err := p.apps.Backends(k)
		if err != nil {
			return Backend{}, nil, nil, err
		}
		if len(backends) > 0 {
			b, rt, release := p.use(k, backends)
			return b, rt, release, nil
		}
		if stopWaiting == nil {
			stopWaiting = p.apps.Wake(k)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return Backend{}, nil, nil, ctx.Err()
		case <-deadline.C:
			return Backend{}, nil, nil, &Unavailable{Code: http.StatusGatewayTimeout,
				Message: fmt.Sprintf("app %s: no replica became ready within %s", k.Name, timeout)}
		}
	}
}

// use takes the backend with the fewest requests in flight and forgets
// the counts and transports of backends that are gone.
func (p *Proxy) use(k Key, backends []Backend) (Backend, http.RoundTripper, func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	counts := p.inflight[k]
	if counts == nil {
		counts = map[string]int{}
		p.inflight[k] = counts
	}
	// The fewest in flight; ties go round (p.turn), so that sequential
	// requests reach every backend too.
	p.turn++
	best := p.turn % len(backends)
	for i := range backends {
		j := (p.turn + i) % len(backends)
		if counts[backends[j].Name] < counts[backends[best].Name] {
			best = j
		}
	}
	b := backends[best]
	counts[b.Name]++
	var rt http.RoundTripper = p.plain
	if b.DialContext != nil {
		live := make(map[string]bool, len(backends))
		for _, o := range backends {
			live[o.Name] = true
		}
		ts := p.dialed[k]
		if ts == nil {
			ts = map[string]*http.Transport{}
			p.dialed[k] = ts
		}
		for name, t := range ts {
			if !live[name] {
				t.CloseIdleConnections()
				delete(ts, name)
			}
		}
		t := ts[b.Name]
		if t == nil {
			t = p.plain.Clone()
			t.DialContext = b.DialContext
			ts[b.Name] = t
		}
		rt = t
	}
	return b, rt, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if counts[b.Name]--; counts[b.Name] <= 0 {
			delete(counts, b.Name)
		}
		if len(counts) == 0 && p.inflight[k] != nil && len(p.inflight[k]) == 0 {
			delete(p.inflight, k)
		}
	}
}
