// Package phase is the one phase of an action or attempt, shared by the
// executor's state machine (the rules), the store (the record) and the views
// (the wire). It is a leaf package on purpose: it depends only on the
// generated wire enum, so the store can use it without importing the
// executor, and the pure state machine can use it without importing the store.
//
// The numbers are those of flyteidl2.common.ActionPhase, so a Phase is stored
// as that number and converts to the wire enum losslessly; TestMatchesWire
// pins that.
package phase

import (
	"fmt"
	"slices"

	"fmgr.dev/gen/go/flyteidl2/common"
)

// Phase is an action (or attempt) phase.
type Phase int32

// Every phase on the wire. PAUSED belongs to conditions (an action waiting for
// a signal), RECOVERED to run recovery (an action whose outputs were taken from
// a previous run); neither is a phase of a task attempt.
const (
	Unspecified         Phase = 0
	Queued              Phase = 1
	WaitingForResources Phase = 2
	Initializing        Phase = 3
	Running             Phase = 4
	Succeeded           Phase = 5
	Failed              Phase = 6
	Aborted             Phase = 7
	TimedOut            Phase = 8
	Paused              Phase = 9
	Recovered           Phase = 10
)

// names are the wire names without their ACTION_PHASE_ prefix.
var names = map[Phase]string{
	Unspecified:         "UNSPECIFIED",
	Queued:              "QUEUED",
	WaitingForResources: "WAITING_FOR_RESOURCES",
	Initializing:        "INITIALIZING",
	Running:             "RUNNING",
	Succeeded:           "SUCCEEDED",
	Failed:              "FAILED",
	Aborted:             "ABORTED",
	TimedOut:            "TIMED_OUT",
	Paused:              "PAUSED",
	Recovered:           "RECOVERED",
}

// terminal lists the phases that end an action. RECOVERED is one: a recovered
// action has its outputs and never runs again. The store's partial index of
// active actions (migration 0002) excludes exactly these.
var terminal = []Phase{Succeeded, Failed, Aborted, TimedOut, Recovered}

// Terminals returns the phases that end an action, in ascending order.
func Terminals() []Phase { return slices.Clone(terminal) }

// String is the wire name without its prefix (SUCCEEDED).
func (p Phase) String() string {
	if n, ok := names[p]; ok {
		return n
	}
	return fmt.Sprintf("Phase(%d)", int32(p))
}

// Terminal reports whether p ends the action: no later phase change is
// possible.
func (p Phase) Terminal() bool { return slices.Contains(terminal, p) }

// Pending reports whether p waits for an attempt to be launched.
func (p Phase) Pending() bool { return p == Queued || p == WaitingForResources }

// Active reports whether an attempt process exists (or should) in phase p.
func (p Phase) Active() bool { return p == Initializing || p == Running }

// Proto returns the wire enum.
func (p Phase) Proto() common.ActionPhase { return common.ActionPhase(p) }

// FromProto converts the wire enum.
func FromProto(p common.ActionPhase) Phase { return Phase(p) }
