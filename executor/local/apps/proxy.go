package apps

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"fmgr.dev/internal/appruntime"
)

// The manager's proxy (appruntime.Proxy) serves the replicas at
// <prefix>/<project>/<domain>/<name>/; the runtime tells it which replicas
// are ready (appruntime.Served) and hears of the requests, which its loop
// scales by.

var (
	_ appruntime.Served    = (*Runtime)(nil)
	_ appruntime.Forwarder = (*Runtime)(nil)
)

// Proxy returns the handler serving the apps under prefix ("/apps").
func (r *Runtime) Proxy(prefix string) *appruntime.Proxy { return appruntime.NewProxy(r, prefix) }

// Lookup finds the app named so (in any org: the URL names none).
func (r *Runtime) Lookup(project, domain, name string) (appruntime.Key, bool) {
	if a := r.find(project, domain, name); a != nil {
		return a.key, true
	}
	return appruntime.Key{}, false
}

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

// Backends are k's ready replicas, or why it cannot serve.
func (r *Runtime) Backends(k appruntime.Key) ([]appruntime.Backend, <-chan struct{}, error) {
	if !r.cfg.Holding() {
		return nil, nil, &appruntime.Unavailable{Code: http.StatusServiceUnavailable,
			Message: "this manager does not run apps: another one holds the executor lease and serves them"}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.apps[k]
	switch {
	case a == nil || a.removed:
		return nil, nil, &appruntime.Unavailable{Code: http.StatusNotFound, Message: "the app was deleted"}
	case !a.target.Active():
		return nil, nil, &appruntime.Unavailable{Code: http.StatusServiceUnavailable,
			Message: fmt.Sprintf("app %s is stopped; `flyte update app %s --activate` starts it", k.Name, k.Name)}
	case a.failed != nil:
		return nil, nil, &appruntime.Unavailable{Code: http.StatusServiceUnavailable,
			Message: fmt.Sprintf("app %s failed: %s", k.Name, a.failed.Message)}
	}
	var out []appruntime.Backend
	for _, rep := range a.replicas {
		if rep.ready && !rep.stopping {
			out = append(out, appruntime.Backend{Name: rep.name, URL: &url.URL{Scheme: "http", Host: rep.net.addr()}, DialContext: rep.net.Dial})
		}
	}
	return out, a.ready, nil
}

// Begin counts a request to k in flight until end.
func (r *Runtime) Begin(k appruntime.Key) (end func()) {
	r.mu.Lock()
	a := r.apps[k]
	r.mu.Unlock()
	if a == nil {
		return func() {}
	}
	return a.scale.Begin(&r.mu)
}

// Wake counts a request waiting for a replica: the loop starts one.
func (r *Runtime) Wake(k appruntime.Key) (done func()) {
	r.mu.Lock()
	a := r.apps[k]
	r.mu.Unlock()
	if a == nil {
		return func() {}
	}
	done = a.scale.Wait(&r.mu)
	r.poke()
	return done
}

// Forward counts a request forwarded to the replica named so.
func (r *Runtime) Forward(k appruntime.Key, name string) (done func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var rep *replica
	if a := r.apps[k]; a != nil {
		for _, c := range a.replicas {
			if c.name == name {
				rep = c
			}
		}
	}
	if rep == nil {
		return func() {}
	}
	rep.inflight++
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		rep.inflight--
	}
}

// RequestTimeout is how long a request of k waits for a replica.
func (r *Runtime) RequestTimeout(k appruntime.Key) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.apps[k]; a != nil {
		return appruntime.RequestTimeout(a.target.Spec)
	}
	return appruntime.DefaultRequestTimeout
}
