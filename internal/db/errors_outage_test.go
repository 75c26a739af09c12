package db_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/pgtest"
)

// TestTranslateLostConnection: when the connection to PostgreSQL is lost
// under a running statement (the host crashed, the network dropped: the
// socket is closed or reset without any PostgreSQL error message), the
// statement's error and every later one while nothing answers translate to
// ErrUnavailable, which clients see as Unavailable, never Internal.
func TestTranslateLostConnection(t *testing.T) {
	for _, reset := range []bool{false, true} {
		name := "closed"
		if reset {
			name = "reset"
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			direct := pgtest.NewDatabase(t)
			p := startCutProxy(t, direct)
			g := open(t, p.dsn)

			errc := make(chan error, 1)
			go func() { errc <- db.Translate(g.WithContext(ctx).Exec("SELECT pg_sleep(600)").Error) }()
			waitForStatement(t, ctx, direct, "SELECT pg_sleep(600)")
			p.cut(reset)

			select {
			case err := <-errc:
				if !errors.Is(err, errs.ErrUnavailable) {
					t.Fatalf("statement under a lost connection: %v (%T), want ErrUnavailable", err, errors.Unwrap(err))
				}
				if msg := err.Error(); msg != errs.ErrUnavailable.Error() {
					t.Fatalf("translated message %q carries driver text", msg)
				}
			case <-ctx.Done():
				t.Fatal("the statement never returned after its connection was lost")
			}
			err := db.Translate(g.WithContext(ctx).Exec("SELECT 1").Error)
			if !errors.Is(err, errs.ErrUnavailable) {
				t.Fatalf("statement while nothing answers: %v, want ErrUnavailable", err)
			}
		})
	}
}

// waitForStatement polls the server (directly, not through the proxy) until
// a session runs sql.
func waitForStatement(t *testing.T, ctx context.Context, dsn, sql string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for {
		var n int
		err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query = $1", sql).Scan(&n)
		if err != nil {
			t.Fatalf("waiting for %q to run: %v", sql, err)
		}
		if n > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%q never started", sql)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// cutProxy forwards TCP connections to a PostgreSQL server until cut, which
// stops accepting and drops every connection at once.
type cutProxy struct {
	dsn string // the target database, through the proxy

	l     net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	cfg, err := pgconn.ParseConfig(target)
	if err != nil {
		t.Fatal(err)
	}
	network, addr := "tcp", net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))
	if strings.HasPrefix(cfg.Host, "/") {
		network, addr = "unix", filepath.Join(cfg.Host, fmt.Sprintf(".s.PGSQL.%d", cfg.Port))
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := url.URL{Scheme: "postgres", User: url.User(cfg.User), Host: l.Addr().String(), Path: "/" + cfg.Database, RawQuery: "sslmode=disable"}
	p := &cutProxy{dsn: u.String(), l: l}
	t.Cleanup(func() { p.cut(false) })
	go func() {
		for {
			down, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial(network, addr)
			if err != nil {
				_ = down.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, down, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, down); _ = up.Close() }()
			go func() { _, _ = io.Copy(down, up); _ = down.Close() }()
		}
	}()
	return p
}

// cut closes the listener and every connection; with reset the client's
// side is reset (RST) instead of closed (FIN).
func (p *cutProxy) cut(reset bool) {
	_ = p.l.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		if tcp, ok := c.(*net.TCPConn); ok && reset {
			_ = tcp.SetLinger(0)
		}
		_ = c.Close()
	}
	p.conns = nil
}
