// Package errs holds the project's error vocabulary and its one mapping to
// Connect codes. Repositories and services return these sentinels (wrapped
// with context via fmt.Errorf("...: %w", errs.ErrNotFound)); the server's
// error interceptor turns them into Connect errors with ToConnect.
package errs

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
)

var (
	// ErrNotFound: the addressed resource does not exist.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: a create hit an existing resource with the same identity.
	ErrAlreadyExists = errors.New("already exists")
	// ErrConflict: the resource changed underneath the caller (optimistic concurrency).
	ErrConflict = errors.New("conflict")
	// ErrInvalid: the caller sent input that can never succeed as sent.
	ErrInvalid = errors.New("invalid argument")
	// ErrPrecondition: the resource is in a state that does not allow the operation.
	ErrPrecondition = errors.New("failed precondition")
	// ErrAborted: the operation lost to a concurrent abort.
	ErrAborted = errors.New("aborted")
	// ErrTooLarge: the request exceeds a configured limit.
	ErrTooLarge = errors.New("limit exceeded")
	// ErrUnavailable: a dependency (database, storage) is temporarily unreachable.
	ErrUnavailable = errors.New("unavailable")
)

// Invalidf returns an ErrInvalid carrying a message a user can act on.
func Invalidf(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrInvalid)
}

// NotFoundf returns an ErrNotFound carrying what was looked for.
func NotFoundf(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrNotFound)
}

var codes = []struct {
	sentinel error
	code     connect.Code
}{
	{ErrNotFound, connect.CodeNotFound},
	{ErrAlreadyExists, connect.CodeAlreadyExists},
	{ErrConflict, connect.CodeAborted},
	{ErrInvalid, connect.CodeInvalidArgument},
	{ErrPrecondition, connect.CodeFailedPrecondition},
	{ErrAborted, connect.CodeAborted},
	{ErrTooLarge, connect.CodeResourceExhausted},
	{ErrUnavailable, connect.CodeUnavailable},
	{context.Canceled, connect.CodeCanceled},
	{context.DeadlineExceeded, connect.CodeDeadlineExceeded},
}

// ToConnect maps err to a Connect error. A *connect.Error passes through
// untouched; one of our sentinels keeps its (safe, caller-facing) message;
// anything else is reported as internal=true so the caller can mask its text.
func ToConnect(err error) (cerr *connect.Error, internal bool) {
	if err == nil {
		return nil, false
	}
	if errors.As(err, &cerr) {
		return cerr, false
	}
	for _, c := range codes {
		if errors.Is(err, c.sentinel) {
			return connect.NewError(c.code, errors.New(err.Error())), false
		}
	}
	return connect.NewError(connect.CodeInternal, err), true
}
