package appruntime

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"fmgr.dev/internal/testkit"
)

// fakeServed serves backends a test sets.
type fakeServed struct {
	mu       sync.Mutex
	key      Key
	backends []Backend
	down     *Unavailable
	changed  chan struct{}
	woken    int
	inflight int
	unknown  bool // Lookup finds nothing
}

func newFake() *fakeServed {
	return &fakeServed{key: Key{Project: "p", Domain: "d", Name: "n"}, changed: make(chan struct{})}
}

func (f *fakeServed) set(bs []Backend, down *Unavailable) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.backends, f.down = bs, down
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeServed) Lookup(p, d, n string) (Key, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.key, !f.unknown && p == f.key.Project && d == f.key.Domain && n == f.key.Name
}

func (f *fakeServed) Backends(Key) ([]Backend, <-chan struct{}, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down != nil {
		return nil, nil, f.down
	}
	return f.backends, f.changed, nil
}

func (f *fakeServed) Begin(Key) func() {
	f.mu.Lock()
	f.inflight++
	f.mu.Unlock()
	return func() { f.mu.Lock(); f.inflight--; f.mu.Unlock() }
}

func (f *fakeServed) Wake(Key) func() {
	f.mu.Lock()
	f.woken++
	f.mu.Unlock()
	return func() {}
}

func (f *fakeServed) RequestTimeout(Key) time.Duration { return time.Minute }

func backend(t *testing.T, name string) Backend {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, name+" "+r.URL.Path+" "+r.Header.Get("X-Forwarded-Prefix"))
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return Backend{Name: name, URL: u}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The proxy strips the app's prefix, balances over the backends, reaches
// a backend through its DialContext, and answers what the runtime says
// when the app cannot serve.
func TestProxyForwardsBalancesAndRefuses(t *testing.T) {
	f := newFake()
	a, b := backend(t, "a"), backend(t, "b")
	// c is reached only through its dialer: its URL names no real host.
	c := backend(t, "c")
	addr := c.URL.Host
	c.URL = &url.URL{Scheme: "http", Host: "replica-c.invalid:80"}
	c.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	f.set([]Backend{a, b, c}, nil)
	srv := httptest.NewServer(NewProxy(f, "/apps"))
	defer srv.Close()

	seen := map[string]bool{}
	for range 30 {
		code, body := get(t, srv.URL+"/apps/p/d/n/x/y")
		if code != http.StatusOK {
			t.Fatalf("got %d %q", code, body)
		}
		name, rest, _ := strings.Cut(body, " ")
		if rest != "/x/y /apps/p/d/n" {
			t.Fatalf("backend got %q", rest)
		}
		seen[name] = true
	}
	if len(seen) != 3 {
		t.Fatalf("requests reached %v, want all three backends", seen)
	}
	if code, _ := get(t, srv.URL+"/apps/p/d/other/"); code != http.StatusNotFound {
		t.Fatalf("an unknown app answered %d", code)
	}
	f.set(nil, &Unavailable{Code: http.StatusServiceUnavailable, Message: "app n is stopped"})
	if code, body := get(t, srv.URL+"/apps/p/d/n/"); code != http.StatusServiceUnavailable || !strings.Contains(body, "stopped") {
		t.Fatalf("a stopped app answered %d %q", code, body)
	}
}

// A request that finds no backend wakes the app and is served once one
// is ready.
func TestProxyWakesAndWaits(t *testing.T) {
	f := newFake()
	srv := httptest.NewServer(NewProxy(f, "/apps"))
	defer srv.Close()
	type result struct {
		code int
		body string
	}
	got := make(chan result, 1)
	go func() {
		resp, err := http.Get(srv.URL + "/apps/p/d/n/")
		if err != nil {
			got <- result{body: err.Error()}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- result{resp.StatusCode, string(b)}
	}()
	testkit.Eventually(t, "the waiting request to wake the app", time.Minute, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.woken > 0
	})
	select {
	case r := <-got:
		t.Fatalf("the request ended before a backend was there: %+v", r)
	default:
	}
	f.set([]Backend{backend(t, "a")}, nil)
	r := <-got
	if r.code != http.StatusOK || !strings.HasPrefix(r.body, "a /") {
		t.Fatalf("got %+v", r)
	}
}

// syncedFake is a runtime that learns its apps after the manager started.
type syncedFake struct {
	*fakeServed
	SyncGate
}

// A request that arrives before the runtime was handed its apps waits for
// them instead of answering 404 (a manager just restarted).
func TestProxyWaitsForTheAppsAtStart(t *testing.T) {
	f := &syncedFake{fakeServed: newFake()}
	f.unknown = true
	f.set([]Backend{backend(t, "a")}, nil)
	srv := httptest.NewServer(NewProxy(f, "/apps"))
	defer srv.Close()
	got := make(chan int, 1)
	go func() {
		resp, err := http.Get(srv.URL + "/apps/p/d/n/")
		if err != nil {
			got <- 0
			return
		}
		resp.Body.Close()
		got <- resp.StatusCode
	}()
	select {
	case code := <-got:
		t.Fatalf("answered %d before the apps were known", code)
	case <-time.After(100 * time.Millisecond): // what an early answer would take at most
	}
	f.mu.Lock()
	f.unknown = false
	f.mu.Unlock()
	f.Synced()
	if code := <-got; code != http.StatusOK {
		t.Fatalf("got %d", code)
	}
}
