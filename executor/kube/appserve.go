package kube

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	pb "fmgr.dev/gen/go/flyteidl2/app"
	"fmgr.dev/internal/appruntime"
)

// The manager's proxy (appruntime.Proxy) serves apps on Kubernetes as it
// serves local ones: straight to the ready Pods of the app's current
// revision at their podIP and the app's port (in a cluster, the manager's
// Pod reaches other Pods' addresses; the Service is for everyone else).
// The Pods the proxy may use are the ones the last reconcile saw ready,
// about a second old at most; a Pod that went away in between answers
// 502 for one request. The scale decision (appruntime.Scale) hears of the
// proxy's requests and sets the Deployment's replicas: down to the
// minimum (zero included) after scaledown_after without a request, up
// from zero for a request that waits, up by concurrency to the maximum.

var _ appruntime.Served = (*Apps)(nil)

// Proxy returns the handler serving the apps under prefix ("/apps").
func (r *Apps) Proxy(prefix string) *appruntime.Proxy { return appruntime.NewProxy(r, prefix) }

func (a *kubeApp) broadcast() {
	if a.changed != nil {
		close(a.changed)
	}
	a.changed = make(chan struct{})
}

// sawBackends records the ready Pods of t's revision among pods as the
// app's backends, and reports whether one of its Pods was ever ready.
func (r *Apps) sawBackends(t appruntime.Target, pods []corev1.Pod) bool {
	port := strconv.Itoa(int(appPort(t)))
	var bs []appruntime.Backend
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp == nil && p.Status.PodIP != "" && podReady(p) {
			bs = append(bs, appruntime.Backend{Name: p.Name, URL: &url.URL{Scheme: "http", Host: net.JoinHostPort(p.Status.PodIP, port)}})
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.apps[t.Key]
	if a == nil || a.target.Revision != t.Revision {
		return false
	}
	same := slices.EqualFunc(a.backends, bs, func(x, y appruntime.Backend) bool { return x.Name == y.Name && x.URL.Host == y.URL.Host })
	a.backends = bs
	if len(bs) > 0 && !a.scale.EverReady {
		a.scale.EverReady = true
		a.scale.LastRequest = time.Now() // idle counts from here
	}
	if !same {
		a.broadcast()
	}
	return a.scale.EverReady
}

// Lookup finds the app named so (in any org: the URL names none).
func (r *Apps) Lookup(project, domain, name string) (appruntime.Key, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, a := range r.apps {
		if k.Project == project && k.Domain == domain && k.Name == name && !a.removed && a.target.Spec != nil {
			return k, true
		}
	}
	return appruntime.Key{}, false
}

// Backends are k's ready Pods, or why it cannot serve.
func (r *Apps) Backends(k appruntime.Key) ([]appruntime.Backend, <-chan struct{}, error) {
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
	case a.reported && a.lastReport.Revision == a.target.Revision && a.lastReport.Status == pb.Status_DEPLOYMENT_STATUS_FAILED:
		return nil, nil, &appruntime.Unavailable{Code: http.StatusServiceUnavailable,
			Message: fmt.Sprintf("app %s failed: %s", k.Name, a.lastReport.Message)}
	}
	return a.backends, a.changed, nil
}

// Begin counts a request to k in flight until end.
func (r *Apps) Begin(k appruntime.Key) (end func()) {
	r.mu.Lock()
	a := r.apps[k]
	r.mu.Unlock()
	if a == nil {
		return func() {}
	}
	return a.scale.Begin(&r.mu)
}

// Wake counts a request waiting for a Pod: the next reconcile scales the
// Deployment up from zero.
func (r *Apps) Wake(k appruntime.Key) (done func()) {
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

// RequestTimeout is how long a request of k waits for a ready Pod.
func (r *Apps) RequestTimeout(k appruntime.Key) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.apps[k]; a != nil && a.target.Spec != nil {
		return appruntime.RequestTimeout(a.target.Spec)
	}
	return appruntime.DefaultRequestTimeout
}
