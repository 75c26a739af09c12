package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// readinessTimeout bounds one /readyz evaluation.
const readinessTimeout = 5 * time.Second

// healthz answers 200 while the process serves.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

// Detail is what a passing readiness check returns to say more than "ok":
// /readyz shows "name: ok (detail)" and stays ready.
type Detail string

func (d Detail) Error() string { return string(d) }

// readyz answers 200 when every readiness check passes, else 503 naming the
// failing checks. While shutting down it answers 503.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if s.draining.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("shutting down\n"))
		return
	}
	s.mu.Lock()
	checks := append([]namedCheck(nil), s.checks...)
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(r.Context(), readinessTimeout)
	defer cancel()
	results := make([]error, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Go(func() { results[i] = runCheck(ctx, c.fn) })
	}
	wg.Wait()

	var b strings.Builder
	ready := true
	for i, c := range checks {
		var detail Detail
		if errors.As(results[i], &detail) {
			fmt.Fprintf(&b, "%s: ok (%s)\n", c.name, string(detail))
			continue
		}
		if results[i] != nil {
			ready = false
			fmt.Fprintf(&b, "%s: not ready: %v\n", c.name, results[i])
		} else {
			fmt.Fprintf(&b, "%s: ok\n", c.name)
		}
	}
	if !ready {
		s.log.Warn("not ready", "checks", strings.TrimSpace(b.String()))
		w.WriteHeader(http.StatusServiceUnavailable)
	} else if len(checks) == 0 {
		b.WriteString("ok\n")
	}
	_, _ = w.Write([]byte(b.String()))
}

// runCheck runs fn, turning a panic or a check that outlives ctx into an error.
func runCheck(ctx context.Context, fn CheckFunc) (err error) {
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("check panicked: %v", p)
			}
		}()
		done <- fn(ctx)
	}()
	select {
	case err = <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("check did not answer within %s", readinessTimeout)
	}
}
