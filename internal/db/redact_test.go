package db_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/errs"
)

// Open's errors name the DSN for the operator, but none of its secrets:
// not the URL's password, nor password/sslpassword query values in any case,
// nor anything of a DSN that cannot be taken apart.
func TestOpenErrorsCarryNoSecret(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String() // a port nobody listens on once closed
	l.Close()
	secrets := []string{"urlSecret1", "querySecret2", "sslSecret3", "Secret4"}
	for _, c := range []struct {
		dsn, want string
		kind      error
	}{
		{"postgres://fm:urlSecret1@" + addr + "/fm?sslmode=disable&connect_timeout=5&Password=querySecret2&SSLPASSWORD=sslSecret3",
			"postgres://fm:REDACTED@" + addr + "/fm?sslmode=disable&connect_timeout=5&Password=REDACTED&SSLPASSWORD=REDACTED", errs.ErrUnavailable},
		{"postgresql://fm@" + addr + "/fm?connect_timeout=5&password=querySecret2", "password=REDACTED", errs.ErrUnavailable},
		{"postgres://fm:hash#Secret4@" + addr + "/fm", "(unparseable)", nil},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := db.Open(ctx, c.dsn)
		cancel()
		if err == nil {
			t.Fatalf("Open(%q) succeeded", c.dsn)
		}
		if c.kind != nil && !errors.Is(err, c.kind) {
			t.Errorf("Open(%q) = %v, want %v", c.dsn, err, c.kind)
		}
		for _, s := range secrets {
			if strings.Contains(err.Error(), s) {
				t.Errorf("Open error leaks %q: %v", s, err)
			}
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open error does not show %q: %v", c.want, err)
		}
	}
}
