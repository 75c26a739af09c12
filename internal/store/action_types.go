package store

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"fmgr.dev/internal/phase"
)

// activePredicate selects the actions that have not ended. It must agree with
// the predicate of the partial index actions_active_idx (migration 0002) and
// is spelled identically, so the planner can use the index.
var activePredicate = func() string {
	terminal := phase.Terminals()
	s := make([]string, len(terminal))
	for i, p := range terminal {
		s[i] = strconv.Itoa(int(p))
	}
	return "phase NOT IN (" + strings.Join(s, ", ") + ")"
}()

// ActionType mirrors flyteidl2's ActionType enum values.
type ActionType int32

const (
	ActionTypeUnspecified ActionType = 0
	ActionTypeTask        ActionType = 1
	ActionTypeTrace       ActionType = 2
	ActionTypeCondition   ActionType = 3
)

// RootName is the name of a run's root action: the run itself.
const RootName = "a0"

// RunKey identifies a run.
type RunKey struct {
	Org     string
	Project string
	Domain  string
	RunName string
}

// Action names an action of this run.
func (k RunKey) Action(name string) ActionKey { return ActionKey{RunKey: k, Name: name} }

func (k RunKey) String() string {
	return fmt.Sprintf("%s/%s/%s/%s", k.Org, k.Project, k.Domain, k.RunName)
}

// ActionKey identifies an action; a run is RunKey.Action(RootName).
type ActionKey struct {
	RunKey `gorm:"embedded"`
	Name   string
}

func (k ActionKey) String() string { return k.RunKey.String() + "/" + k.Name }

// Action is a row of actions. A run is its root action (ParentName nil).
type Action struct {
	ID               int64 `gorm:"primaryKey"`
	ActionKey        `gorm:"embedded"`
	ParentName       *string // nil for the root
	ActionType       ActionType
	Task             TaskID `gorm:"embedded;embeddedPrefix:task_"`
	TaskType         string // TaskTemplate.type: which plugin runs it
	ShortName        string
	EnvironmentName  string
	SpecDigest       string // "" for actions without a stored spec (stored as NULL)
	Phase            phase.Phase
	Attempts         int32  // number of the current attempt; attempts start at 1
	InputURI         string `gorm:"column:input_uri"`
	RunOutputBase    string
	Group            string `gorm:"column:action_group"`
	RunSpec          []byte // root only
	ErrorInfo        []byte // latest error, serialized
	AbortInfo        []byte // why it was aborted, serialized
	AbortRequestedAt *time.Time
	CacheStatus      int32
	CacheKey         string // a discoverable task's cache key ("" otherwise)
	Queue            string // the named queue it was routed to ("" for none)
	CreatedBy        string
	CreatedAt        time.Time
	UpdatedAt        time.Time
	StartedAt        *time.Time // first entered INITIALIZING or RUNNING
	EndedAt          *time.Time // reached a terminal phase
	// ResourceVersion is the global version of this action's last change;
	// pass it back to Update for optimistic concurrency.
	ResourceVersion int64
	// RecoveredFrom names the run whose same-named action this one took its
	// outputs from (phase RECOVERED); "" for actions that ran.
	RecoveredFrom string
	// ConditionSpec is a condition action's serialized ConditionAction (nil
	// for other actions); SignalInfo its serialized SignalInfo once it was
	// signalled (or recovered).
	ConditionSpec []byte
	SignalInfo    []byte
}

func (Action) TableName() string { return "actions" }

// IsRoot reports whether a is a run's root action.
func (a *Action) IsRoot() bool { return a.ParentName == nil }

// Attempt is one try at running an action.
type Attempt struct {
	ActionID  int64 `gorm:"primaryKey"`
	Attempt   int32 `gorm:"primaryKey"`
	Phase     phase.Phase
	StartedAt time.Time
	EndedAt   *time.Time
	ErrorInfo []byte
	OutputURI string `gorm:"column:output_uri"`
	LogInfo   []byte
	Cluster   string
	// OwnerToken is the executor lease token of the manager that started
	// the attempt (0 for attempts from before leases).
	OwnerToken int64
}

func (Attempt) TableName() string { return "action_attempts" }

// Change ops, as in a Kubernetes watch.
const (
	ChangeAdded    = "ADDED"
	ChangeModified = "MODIFIED"
	ChangeDeleted  = "DELETED"
)

// KindAction is the change_log kind of action changes.
const KindAction = "action"

// Change is a row of change_log: the action Key changed at ResourceVersion.
type Change struct {
	ResourceVersion       int64 `gorm:"primaryKey"`
	Kind                  string
	Op                    string
	Key                   ActionKey `gorm:"embedded"`
	ObjectResourceVersion int64     // the action's resource version after the change
	OccurredAt            time.Time
	// Action is the action's row as the hub read it with the change
	// (ChangeFeed): at least as new as the change (see Superseded), nil
	// when the action is gone or the change came from ChangesSince. Shared
	// by every subscriber: read only.
	Action *Action `gorm:"-"`
}

func (Change) TableName() string { return "change_log" }

// Superseded reports whether Action is newer than the change: the action
// changed again after it, and that later change, further on in the log,
// comes with this same row (every write of an action row appends a change
// at the row's new version). A change still unread when its action
// changed again is read with the newer row, ahead of the changes in
// between; a watcher that shows several actions and took the row now
// would show this action ahead of the others, so it waits for the later
// change instead.
func (c Change) Superseded() bool {
	return c.Action != nil && c.Action.ResourceVersion > c.ResourceVersion
}
