package v1

// The one place for the names the executor, the manager and kubectl users
// share: condition types and reasons, labels, the finalizer.

// Condition types of status.conditions. Progressing is True while the action
// is on its way (its reason is the STATUS print column); exactly one of
// Succeeded and Failed becomes True when it ends.
const (
	ConditionProgressing = "Progressing"
	ConditionSucceeded   = "Succeeded"
	ConditionFailed      = "Failed"
)

// Condition reasons.
const (
	// ReasonQueued: waiting for its Pod to be created or scheduled.
	ReasonQueued = "Queued"
	// ReasonInitializing: the Pod is scheduled and starting.
	ReasonInitializing = "Initializing"
	// ReasonExecuting: the task's container runs.
	ReasonExecuting = "Executing"
	// ReasonCompleted: the task succeeded (Progressing False, Succeeded True).
	ReasonCompleted = "Completed"
	// ReasonRetryableFailure: an attempt failed and another one will follow.
	ReasonRetryableFailure = "RetryableFailure"
	// ReasonPermanentFailure: the last attempt failed; the action failed.
	ReasonPermanentFailure = "PermanentFailure"
	// ReasonAborted: the action was aborted (its TaskAction deleted).
	ReasonAborted = "Aborted"
	// ReasonInvalidSpec: the spec cannot be run (a missing or unreadable
	// task template, no input location...); nothing was started.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonPluginNotFound: no plugin handles spec.taskType.
	ReasonPluginNotFound = "PluginNotFound"
	// ReasonPaused: a condition action waits for its signal.
	ReasonPaused = "Paused"
	// ReasonSignaled: a condition action received its value.
	ReasonSignaled = "Signaled"
	// ReasonTimedOut: the action ran out of time.
	ReasonTimedOut = "TimedOut"
)

// Labels on every TaskAction, so an action tree can be selected by run or by
// project and domain (kubectl get taskactions -l flyte.org/run=r1).
const (
	LabelProject    = "flyte.org/project"
	LabelDomain     = "flyte.org/domain"
	LabelRun        = "flyte.org/run"
	LabelAction     = "flyte.org/action"
	LabelActionType = "flyte.org/action-type"
	// LabelIsRoot is "true" on the root action of a run, "false" elsewhere.
	LabelIsRoot = "flyte.org/is-root"
)

// Finalizer keeps a task's TaskAction until the executor has stopped its Pod
// and recorded the abort.
const Finalizer = "flyte.org/plugin-finalizer"
