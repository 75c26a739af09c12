package machine

import "fmt"

// ErrorKind says who is to blame for a failure. The numbers are those of
// flyteidl2.core.ExecutionError.ErrorKind and flyteidl2.workflow.ErrorInfo.Kind.
type ErrorKind int32

// Error kinds.
const (
	KindUnknown ErrorKind = 0
	KindUser    ErrorKind = 1
	KindSystem  ErrorKind = 2
)

func (k ErrorKind) String() string {
	switch k {
	case KindUser:
		return "USER"
	case KindSystem:
		return "SYSTEM"
	}
	return "UNKNOWN"
}

// Error is a failure of one attempt or of the action.
type Error struct {
	Kind        ErrorKind
	Code        string
	Message     string
	Recoverable bool
	// Reported: the task reported it (see Failed.Reported).
	Reported bool
}

func (e *Error) String() string {
	if e == nil {
		return "<nil>"
	}
	r := "non-recoverable"
	if e.Recoverable {
		r = "recoverable"
	}
	return fmt.Sprintf("%s %s error %s: %s", r, e.Kind, e.Code, e.Message)
}

// Error codes the machine itself produces. The timeout codes are the ones the
// SDK maps to its TaskTimeoutError subclasses (flyte/_internal/runtime/convert.py).
const (
	CodeQueuedTimeout = "QUEUED_TIMEOUT_EXCEEDED"
	CodeMaxRuntime    = "MAX_RUNTIME_EXCEEDED"
	CodeDeadline      = "DEADLINE_EXCEEDED"
	CodeCrashed       = "ProcessCrashed"
	CodeOrphaned      = "AttemptOrphaned"
)
