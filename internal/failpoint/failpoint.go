// Package failpoint marks the places where the crash tests kill the manager.
//
// A failpoint is one call, failpoint.Hit("name"), at a place where a crash
// would leave work half done (a commit made but not yet acted on, a process
// started but not yet recorded, ...). In a normal build Hit is an empty
// function the compiler inlines away. A build with `-tags failpoints` (only
// the fault tests make one) kills the process with SIGKILL at the point that
// FLYTE_MANAGER_FAILPOINT names:
//
//	FLYTE_MANAGER_FAILPOINT=name      on the first hit
//	FLYTE_MANAGER_FAILPOINT=name@N    on the N-th hit, so the crash lands
//	                                   with other work in flight
//
// Before it dies, the armed point appends one line to the file named by
// FLYTE_MANAGER_FAILPOINT_MARK (when set), so that a test can tell the
// planned crash from any other death.
package failpoint

// The names used in the manager; the fault tests arm them by these names.
const (
	// CreateRunCommitted: CreateRun's transaction committed, the caller has
	// no answer yet and the executor has not been told.
	CreateRunCommitted = "create-run-committed"
	// AttemptClaimed: an attempt is recorded INITIALIZING, its process has
	// not started.
	AttemptClaimed = "attempt-claimed"
	// ProcessStarted: the attempt's process runs, its identity is not yet
	// recorded.
	ProcessStarted = "process-started"
	// ProcessExited: the attempt's process ended, its result is not yet
	// recorded.
	ProcessExited = "process-exited"
	// AbortCascade: an abort is committed for a tree of actions and the
	// executor has been told about some of them only.
	AbortCascade = "abort-cascade"
	// ChildEnqueued: a fan-out's child action is committed, the executor has
	// not been told.
	ChildEnqueued = "child-enqueued"
)

// Names lists every failpoint, for tests that cover them all.
var Names = []string{CreateRunCommitted, AttemptClaimed, ProcessStarted, ProcessExited, AbortCascade, ChildEnqueued}
