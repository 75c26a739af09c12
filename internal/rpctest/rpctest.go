// Package rpctest holds assertions for tests that call services through
// Connect clients.
package rpctest

import (
	"errors"
	"strings"
	"testing"

	"connectrpc.com/connect"
)

// WantCode fails the test unless err is a Connect error with code whose
// message mentions every fragment.
func WantCode(t testing.TB, err error, code connect.Code, fragments ...string) {
	t.Helper()
	var cerr *connect.Error
	if !errors.As(err, &cerr) || cerr.Code() != code {
		t.Fatalf("error = %v, want code %v", err, code)
	}
	for _, f := range fragments {
		if !strings.Contains(cerr.Message(), f) {
			t.Fatalf("error message %q does not mention %q", cerr.Message(), f)
		}
	}
}
