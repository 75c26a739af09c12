package server

import (
	"io"
	"net/http"
	"sync"
	"time"
)

// limitBodyReads puts a read deadline on every request body, so a client that
// declares a body and never sends it (or stops half-way) cannot hold a
// connection and a goroutine forever. The deadline follows progress: each
// read that delivers bytes pushes it out again, so a slow upload of a large
// body is not cut as long as it keeps moving. When the body ends, the
// deadline is lifted, so the response of a server stream (WatchRuns runs for
// hours after its one request message) is never cut. http.Server's own
// ReadTimeout cannot do this: it bounds the whole request, and on HTTP/1.1
// keeps running while the response streams.
//
// Every request body is covered, streaming protocols included: the manager
// serves no client- or bidi-streaming procedure, whose clients may pause
// between messages; one added later must be exempted here.
//
// The deadline is re-armed at most every eighth of the timeout (each re-arm
// on HTTP/2 is a message to the connection's serve loop), to now plus nine
// eighths of it: a body is cut after between one and 9/8 timeouts without a
// byte.
func (s *Server) limitBodyReads(next http.Handler) http.Handler {
	timeout := s.cfg.BodyReadTimeout
	if timeout <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		b := &deadlineBody{body: r.Body, rc: http.NewResponseController(w), timeout: timeout}
		if r.ProtoMajor == 1 {
			b.header = w.Header()
		}
		if !b.arm(time.Now()) {
			next.ServeHTTP(w, r) // the writer cannot set deadlines (tests without a connection)
			return
		}
		r.Body = b
		next.ServeHTTP(w, r)
	})
}

// deadlineBody renews the connection's (HTTP/1.1) or stream's (HTTP/2) read
// deadline as the body makes progress, and lifts it at the end of the body.
type deadlineBody struct {
	body    io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	// header is the HTTP/1.x response header, to ask for the connection's
	// close once the body failed; nil on HTTP/2.
	header http.Header

	mu      sync.Mutex
	armedAt time.Time
	done    bool
}

// arm sets the deadline to now plus 9/8 of the timeout; false when the
// writer does not support read deadlines.
func (b *deadlineBody) arm(now time.Time) bool {
	b.armedAt = now
	return b.rc.SetReadDeadline(now.Add(b.timeout+b.timeout/8)) == nil
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.done:
	case err == io.EOF:
		// The body is complete: the deadline must not outlive it into a
		// long response. (net/http lifts it itself on HTTP/1.1 when the
		// body ends; on HTTP/2 the stream's timer would stay armed.)
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	case err != nil:
		// The body failed, possibly by the deadline. Its rest may still
		// arrive and be taken for the next request, so on HTTP/1.x the
		// connection must close after the answer; the deadline stays, so
		// nothing waits for that rest without a limit.
		b.done = true
		if b.header != nil {
			b.header.Set("Connection", "close")
		}
	case n > 0:
		if now := time.Now(); now.Sub(b.armedAt) >= b.timeout/8 {
			b.arm(now)
		}
	}
	return n, err
}

func (b *deadlineBody) Close() error { return b.body.Close() }
