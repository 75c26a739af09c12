// Package machine is the executor's one state machine for an action and its
// attempts. It is pure: no clock, no I/O, no goroutines. A driver (local host
// processes or Kubernetes) feeds it Events; Transition answers with the next
// State and a Decision (retry with a new attempt, stop at a terminal phase, or
// nothing to do). Both drivers apply the same rules:
//
//   - user retries only for RECOVERABLE user errors, up to
//     TaskMetadata.retries.retries; NON_RECOVERABLE fails at once;
//   - system failures (a crash without an error document, an attempt orphaned
//     by a manager restart, a recoverable error of SYSTEM origin) are retried
//     up to Policy.MaxSystemRetries, independently of the user budget;
//   - a timeout ends the action TIMED_OUT;
//   - an abort ends any non-terminal action ABORTED;
//   - terminal phases absorb every later event (no resurrection).
package machine

import (
	"fmt"

	"fmgr.dev/gen/go/flyteidl2/common"
)

// Phase is an action (or attempt) phase. The numbers are those of
// flyteidl2.common.ActionPhase so a Phase converts to the wire enum losslessly.
type Phase int32

// Phases the machine uses. PAUSED (9) and RECOVERED (10) exist on the wire but
// belong to conditions and run recovery, not to task attempts.
const (
	PhaseUnspecified         Phase = 0
	PhaseQueued              Phase = 1
	PhaseWaitingForResources Phase = 2
	PhaseInitializing        Phase = 3
	PhaseRunning             Phase = 4
	PhaseSucceeded           Phase = 5
	PhaseFailed              Phase = 6
	PhaseAborted             Phase = 7
	PhaseTimedOut            Phase = 8
)

var phaseNames = map[Phase]string{
	PhaseUnspecified:         "UNSPECIFIED",
	PhaseQueued:              "QUEUED",
	PhaseWaitingForResources: "WAITING_FOR_RESOURCES",
	PhaseInitializing:        "INITIALIZING",
	PhaseRunning:             "RUNNING",
	PhaseSucceeded:           "SUCCEEDED",
	PhaseFailed:              "FAILED",
	PhaseAborted:             "ABORTED",
	PhaseTimedOut:            "TIMED_OUT",
}

func (p Phase) String() string {
	if n, ok := phaseNames[p]; ok {
		return n
	}
	return fmt.Sprintf("Phase(%d)", int32(p))
}

// Terminal reports whether p ends the action.
func (p Phase) Terminal() bool {
	switch p {
	case PhaseSucceeded, PhaseFailed, PhaseAborted, PhaseTimedOut:
		return true
	}
	return false
}

// Pending reports whether p waits for an attempt to be launched.
func (p Phase) Pending() bool {
	return p == PhaseQueued || p == PhaseWaitingForResources
}

// Active reports whether an attempt process exists (or should) in phase p.
func (p Phase) Active() bool {
	return p == PhaseInitializing || p == PhaseRunning
}

// Valid reports whether p is a phase the machine can be in.
func (p Phase) Valid() bool {
	return p.Pending() || p.Active() || p.Terminal()
}

// Proto returns the wire enum.
func (p Phase) Proto() common.ActionPhase { return common.ActionPhase(p) }

// PhaseFromProto converts the wire enum.
func PhaseFromProto(p common.ActionPhase) Phase { return Phase(p) }

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
