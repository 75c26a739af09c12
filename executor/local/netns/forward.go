package netns

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Forwarder accepts connections on one listener and joins each to a
// connection dial makes: the bridge between a replica's namespace and the
// manager's, one way or the other (a Unix socket of the manager's that
// dials into the namespace, or a listener inside the namespace that dials
// the manager).
type Forwarder struct {
	l    net.Listener
	dial func(ctx context.Context) (net.Conn, error)

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// dialTimeout bounds each dial of a forwarded connection.
const dialTimeout = 10 * time.Second

// Forward starts forwarding l's connections through dial; Close stops it.
func Forward(l net.Listener, dial func(ctx context.Context) (net.Conn, error)) *Forwarder {
	f := &Forwarder{l: l, dial: dial, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.accept()
	return f
}

// Addr is where the forwarder listens.
func (f *Forwarder) Addr() net.Addr { return f.l.Addr() }

func (f *Forwarder) accept() {
	defer f.wg.Done()
	for {
		c, err := f.l.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // closed
		}
		if !f.track(c) {
			_ = c.Close()
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.join(c)
		}()
	}
}

func (f *Forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *Forwarder) untrack(c net.Conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
	_ = c.Close()
}

// join copies both ways between c and a new connection of dial's until
// either side is done; a half close is passed on.
func (f *Forwarder) join(c net.Conn) {
	defer f.untrack(c)
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	up, err := f.dial(ctx)
	cancel()
	if err != nil {
		return // the client sees the connection closed
	}
	if !f.track(up) {
		_ = up.Close()
		return
	}
	defer f.untrack(up)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
}

// Close stops accepting, ends every forwarded connection and waits for
// the forwarder's goroutines.
func (f *Forwarder) Close() error {
	f.mu.Lock()
	f.closed = true
	err := f.l.Close()
	for c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
	return err
}
