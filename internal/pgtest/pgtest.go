// Package pgtest gives tests a real PostgreSQL: one throwaway server per
// test binary (the machine's PostgreSQL 15 binaries, started on first use,
// listening only on a unix socket in its own temporary directory) and a
// fresh database per test.
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		dsn := pgtest.NewDatabase(t) // postgres://... of an empty database, dropped after t
//	}
//
// With FM_TEST_POSTGRES_DSN set (a superuser DSN of a running server), that
// server is used instead and nothing is started. Missing binaries fail the
// test with install instructions; they never skip it.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Environment variables: EnvDSN points the tests at an existing server;
// EnvBinDir names the directory holding initdb and postgres.
const (
	EnvDSN    = "FM_TEST_POSTGRES_DSN"
	EnvBinDir = "FM_TEST_POSTGRES_BINDIR"
)

var (
	mu       sync.Mutex
	inMain   bool
	server   *Server // started lazily
	startErr error
	adminDSN string
	counter  atomic.Int64
)

// Main runs the tests and then stops the server if one was started. Use it
// as the whole body of TestMain.
func Main(m *testing.M) {
	os.Exit(Run(m))
}

// Run is Main for a TestMain with its own cleanup to do after the tests:
// it returns the exit code instead of exiting (os.Exit skips deferred calls).
func Run(m *testing.M) int {
	mu.Lock()
	inMain = true
	mu.Unlock()
	code := m.Run()
	mu.Lock()
	if server != nil {
		server.Stop()
	}
	mu.Unlock()
	return code
}

// NewDatabase creates an empty database for t and returns its DSN. The
// database is dropped when t ends.
func NewDatabase(t testing.TB) string {
	t.Helper()
	admin, err := admin()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	name := fmt.Sprintf("t%d_%d_%s", os.Getpid(), counter.Add(1), sanitize(t.Name()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := adminExec(ctx, admin, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// FORCE: a test's pool may still hold idle connections.
		if err := adminExec(ctx, admin, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return withDatabase(admin, name)
}

// admin returns the superuser DSN of the server, starting it on first use.
func admin() (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if adminDSN != "" {
		return adminDSN, nil
	}
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		adminDSN = dsn
		return dsn, nil
	}
	if startErr != nil {
		return "", startErr
	}
	if !inMain {
		// Without Main nobody would stop the server at the end.
		return "", errors.New("call pgtest.Main(m) from TestMain before using pgtest.NewDatabase")
	}
	s, err := Start()
	if err != nil {
		startErr = err
		return "", err
	}
	server = s
	adminDSN = s.DSN("postgres")
	return adminDSN, nil
}

func adminExec(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// withDatabase returns dsn with its database name replaced.
func withDatabase(dsn, name string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	u.Path = "/" + name
	return u.String()
}

var unsafeChars = regexp.MustCompile(`[^a-z0-9_]+`)

// sanitize turns a test name into something short and legal in an identifier.
func sanitize(s string) string {
	s = unsafeChars.ReplaceAllString(strings.ToLower(s), "_")
	if len(s) > 40 {
		s = s[len(s)-40:]
	}
	return s
}
