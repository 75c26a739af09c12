package apps

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"fmgr.dev/internal/appruntime"
)

// The manager serves every app at <its address><prefix>/<project>/<domain>/<name>/
// (prefix "/apps" by default): a request is forwarded to one of the app's
// ready replicas with the prefix and the app's path removed (and
// X-Forwarded-Prefix set to them), balanced by requests in flight. A
// request that finds no ready replica (scaled to zero, starting) waits
// for one, up to the app's request timeout. A stopped or failed app
// answers 503 saying so; an unknown one 404.

// Proxy serves the apps under Prefix.
type Proxy struct {
	rt     *Runtime
	prefix string
}

// Proxy returns the handler serving the apps under prefix ("/apps").
func (r *Runtime) Proxy(prefix string) *Proxy {
	return &Proxy{rt: r, prefix: "/" + strings.Trim(prefix, "/")}
}

// Pattern is the ServeMux pattern the proxy is mounted at.
func (p *Proxy) Pattern() string { return p.prefix + "/" }

// URL is the public URL of k under base (the manager's base URL).
func (p *Proxy) URL(base string, k appruntime.Key) string {
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
	a := p.rt.find(project, domain, name)
	if a == nil {
		http.Error(w, fmt.Sprintf("no app %q in project %s, domain %s", name, project, domain), http.StatusNotFound)
		return
	}
	rep, release, err := p.rt.pick(req.Context(), a)
	if err != nil {
		var se statusError
		if errors.As(err, &se) {
			w.Header().Set("Retry-After", "5")
			http.Error(w, se.msg, se.code)
			return
		}
		http.Error(w, "the request ended while waiting for a replica", http.StatusServiceUnavailable)
		return
	}
	defer release()
	prefix := p.prefix + "/" + project + "/" + domain + "/" + name
	target := &url.URL{Scheme: "http", Host: rep.addr()}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.URL.Path, pr.Out.URL.RawPath = path, ""
			pr.Out.Host = req.Host
			pr.SetXForwarded()
			pr.Out.Header.Set("X-Forwarded-Prefix", prefix)
		},
		FlushInterval: -1,
		Transport:     rep.net.transport, // dials the replica, in its namespace or not
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, fmt.Sprintf("app %s: its replica %s did not answer", name, rep.name), http.StatusBadGateway)
		},
	}
	proxy.ServeHTTP(w, req)
}

type statusError struct {
	code int
	msg  string
}

func (e statusError) Error() string { return e.msg }

// find is the app named so (in any org: the URL names none).
func (r *Runtime) find(project, domain, name string) *appState {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, a := range r.apps {
		if k.Project == project && k.Domain == domain && k.Name == name && !a.removed {
			return a
		}
	}
	return nil
}

// pick returns a ready replica of a for one request, waiting for one when
// there is none, and the function that ends the request.
func (r *Runtime) pick(ctx context.Context, a *appState) (*replica, func(), error) {
	r.mu.Lock()
	a.lastRequest = time.Now()
	a.inflight++
	timeout := requestTimeout(a.target.Spec)
	r.mu.Unlock()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	waiting := false
	done := func() {
		r.mu.Lock()
		a.inflight--
		a.lastRequest = time.Now()
		if waiting {
			a.waiting--
		}
		r.mu.Unlock()
	}
	for {
		if !r.cfg.Holding() {
			done()
			return nil, nil, statusError{http.StatusServiceUnavailable, "this manager does not run apps: another one holds the executor lease and serves them"}
		}
		r.mu.Lock()
		switch {
		case a.removed:
			r.mu.Unlock()
			done()
			return nil, nil, statusError{http.StatusNotFound, "the app was deleted"}
		case !a.target.Active():
			r.mu.Unlock()
			done()
			return nil, nil, statusError{http.StatusServiceUnavailable, fmt.Sprintf("app %s is stopped; `flyte update app %s --activate` starts it", a.key.Name, a.key.Name)}
		case a.failed != nil:
			msg := a.failed.Message
			r.mu.Unlock()
			done()
			return nil, nil, statusError{http.StatusServiceUnavailable, fmt.Sprintf("app %s failed: %s", a.key.Name, msg)}
		}
		var best *replica
		for _, rep := range a.replicas {
			if rep.ready && !rep.stopping && (best == nil || rep.inflight < best.inflight) {
				best = rep
			}
		}
		if best != nil {
			best.inflight++
			if waiting {
				a.waiting--
				waiting = false
			}
			r.mu.Unlock()
			return best, func() {
				r.mu.Lock()
				best.inflight--
				r.mu.Unlock()
				done()
			}, nil
		}
		if !waiting {
			waiting = true
			a.waiting++
		}
		ready := a.ready
		r.mu.Unlock()
		r.poke()
		select {
		case <-ready:
		case <-ctx.Done():
			done()
			return nil, nil, ctx.Err()
		case <-deadline.C:
			done()
			return nil, nil, statusError{http.StatusGatewayTimeout, fmt.Sprintf("app %s: no replica became ready within %s", a.key.Name, timeout)}
		}
	}
}
