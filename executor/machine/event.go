package machine

import (
	"fmt"
	"time"

	"fmgr.dev/internal/phase"
)

// Event is something a driver observed about an action or one of its
// attempts. Events that concern an attempt carry its number in Attempt; 0
// means "the current attempt". An event for an older attempt is stale (it
// raced with a retry) and is ignored.
type Event interface {
	// Name is the event's name for logs.
	Name() string
	attempt() uint32
}

// Wait: the attempt cannot start yet (concurrency limit, cache reservation
// held by another action). QUEUED → WAITING_FOR_RESOURCES.
type Wait struct {
	Attempt uint32
	Reason  string
}

// Start: the attempt was launched (process started, pod created).
// QUEUED/WAITING_FOR_RESOURCES → INITIALIZING.
type Start struct {
	Attempt uint32
}

// Running: the attempt's process reports it is running user code.
// INITIALIZING → RUNNING.
type Running struct {
	Attempt uint32
}

// Succeeded: the attempt ended well (outputs written), or a cache hit
// satisfied a pending action without an attempt.
type Succeeded struct {
	Attempt uint32
}

// Recovered: a pending action of a recovering run took its outputs from
// the same action of the source run; no attempt runs.
type Recovered struct {
	Attempt uint32
}

// Failed: the attempt ended with an error document (or the driver could not
// launch it for a reason it understands). Kind is the error's origin.
type Failed struct {
	Attempt     uint32
	Kind        ErrorKind
	Recoverable bool
	Code        string
	Message     string
	// Reported: the task itself reported the error (its error document).
	// Its retries are then the task's whatever the kind: a SYSTEM error the
	// task raises is not something the platform did.
	Reported bool
}

// TimedOut: a timeout fired. Code is one of CodeQueuedTimeout, CodeMaxRuntime,
// CodeDeadline ("" means CodeMaxRuntime).
type TimedOut struct {
	Attempt uint32
	Code    string
	Message string
}

// Crashed: the attempt's process died without an error document or outputs
// (non-zero exit, killed by a signal the platform did not send, out of
// memory). A recoverable user failure: the process is the task's, so the
// crash counts against the task's retries (TaskMetadata.retries), and a task
// with retries=0 runs exactly once. Failures the platform causes (a launch
// that could not happen, a manager that died) are Failed with KindSystem or
// Orphaned instead.
type Crashed struct {
	Attempt  uint32
	ExitCode int
	Signal   string
	Message  string
}

// Orphaned: after a manager restart the attempt was found active without a
// process the manager controls. A recoverable system failure; the driver must
// make sure the old process is gone (the Retry says StopAttempt).
type Orphaned struct {
	Attempt uint32
	Message string
}

// AbortRequested: a user (or a cascading parent abort) asked to stop the
// action. It applies to whichever attempt is current.
type AbortRequested struct {
	Reason string
	By     string
}

func (Wait) Name() string           { return "Wait" }
func (Start) Name() string          { return "Start" }
func (Running) Name() string        { return "Running" }
func (Succeeded) Name() string      { return "Succeeded" }
func (Recovered) Name() string      { return "Recovered" }
func (Failed) Name() string         { return "Failed" }
func (TimedOut) Name() string       { return "TimedOut" }
func (Crashed) Name() string        { return "Crashed" }
func (Orphaned) Name() string       { return "Orphaned" }
func (AbortRequested) Name() string { return "AbortRequested" }

func (e Wait) attempt() uint32         { return e.Attempt }
func (e Start) attempt() uint32        { return e.Attempt }
func (e Running) attempt() uint32      { return e.Attempt }
func (e Succeeded) attempt() uint32    { return e.Attempt }
func (e Recovered) attempt() uint32    { return e.Attempt }
func (e Failed) attempt() uint32       { return e.Attempt }
func (e TimedOut) attempt() uint32     { return e.Attempt }
func (e Crashed) attempt() uint32      { return e.Attempt }
func (e Orphaned) attempt() uint32     { return e.Attempt }
func (AbortRequested) attempt() uint32 { return 0 }

// Decision is what the driver must do after a transition: a *Retry, a
// *Terminal, an *Ignored, or nil when there is nothing to do beyond recording
// the new state.
type Decision interface {
	decision()
	String() string
}

// Retry: the current attempt failed and another one is due. The state is
// already QUEUED with Attempt = the new number; the driver launches it after
// Delay.
type Retry struct {
	// Attempt is the new attempt's number (old + 1).
	Attempt uint32
	// System is true when the system budget paid for the retry.
	System bool
	// Cause is the failure of the previous attempt.
	Cause Error
	// Delay is the backoff before the new attempt may start.
	Delay time.Duration
	// StopAttempt asks the driver to make sure the previous attempt's
	// process is gone (an orphan may still be alive).
	StopAttempt bool
	Reason      string
}

// Terminal: the action ended.
type Terminal struct {
	Phase phase.Phase
	// Error is set for FAILED and TIMED_OUT.
	Error *Error
	// StopAttempt asks the driver to kill the current attempt's process
	// (abort or timeout of an active attempt).
	StopAttempt bool
	Reason      string
}

// Ignored: the event changed nothing and needs no action (stale attempt,
// action already terminal). Reason is for logs.
type Ignored struct {
	Reason string
}

func (*Retry) decision()    {}
func (*Terminal) decision() {}
func (*Ignored) decision()  {}

func (d *Retry) String() string {
	budget := "user"
	if d.System {
		budget = "system"
	}
	return fmt.Sprintf("retry as attempt %d (%s budget) after %s: %s", d.Attempt, budget, d.Delay, d.Reason)
}

func (d *Terminal) String() string {
	return fmt.Sprintf("terminal %s: %s", d.Phase, d.Reason)
}

func (d *Ignored) String() string { return "ignored: " + d.Reason }
