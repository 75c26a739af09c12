package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/phase"
)

// AnyVersion, passed as the expected version, skips the optimistic
// concurrency check (for writers that must win, such as an abort).
const AnyVersion int64 = 0

// Update is one change to an action. Zero fields leave things as they are.
type Update struct {
	// Phase is the action's new phase. The current attempt enters it too,
	// unless AttemptPhase says otherwise or Retry opens a new attempt.
	Phase phase.Phase
	// AttemptPhase closes the current attempt in a phase other than the
	// action's: an attempt FAILED while the action is retried (Retry) and
	// goes back to QUEUED.
	AttemptPhase phase.Phase
	// Retry ends the current attempt and opens attempt Attempts+1 in Phase
	// (or the action's current phase).
	Retry bool
	// At is when the change happened; zero means now.
	At time.Time

	ErrorInfo   []byte // serialized error: on the current attempt and the action
	OutputURI   string // of the current attempt
	LogInfo     []byte // of the current attempt
	Cluster     string // of the current attempt
	CacheStatus *int32
	AbortInfo   []byte
	// RecoveredFrom records the run a RECOVERED action took its outputs from.
	RecoveredFrom string
	// SignalInfo records a condition's value (a serialized SignalInfo).
	SignalInfo []byte
	// AbortRequested marks the action for abort; the executor acts on it
	// and reports ABORTED. Marking twice keeps the first time.
	AbortRequested bool
	// Fence is the executor's lease token: the write commits only while the
	// local executor's lease still carries it (ErrFenced otherwise). 0 for
	// writes that are not the executor's (the API's).
	Fence int64
	// Owner records, on the current attempt, the lease token of the
	// executor that starts it.
	Owner int64
	// Events describe what the write records in the history: the one
	// matching a phase an attempt enters here (same attempt and phase)
	// details that transition, the others are recorded as further reports
	// of their phase (cluster events). Transitions without one are
	// recorded bare. Versions are the store's to take.
	Events []Event
}

// Update applies u to the action if its resource version is still
// expected (or expected is AnyVersion), and returns the updated action.
// The action row, its attempt rows, history events and a change_log row
// are written in one transaction under a new resource version. A stale
// expected version yields errs.ErrConflict; changing the phase of an
// action that already ended yields errs.ErrPrecondition.
func (r *Actions) Update(ctx context.Context, key ActionKey, expected int64, u Update) (*Action, error) {
	if u.Retry && u.Phase.Terminal() {
		return nil, errs.Invalidf("action %s: a retry cannot start in a terminal phase", key)
	}
	var out *Action
	err := r.w.replay(ctx, func(w *writeTx) error {
		var err error
		out, err = update(w, key, expected, u)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// UpdateFrom is Update for a writer that holds the action as it last read
// or wrote it: a, at version a.ResourceVersion, is the expected version and
// the row the write starts from, so the write does not read the row again
// (on PostgreSQL one round trip fewer in the batch, every batch's writes
// one after another). When the row moved since a was read, the write's
// version condition matches nothing and it fails with errs.ErrConflict,
// having written nothing, as Update does. a itself is left as it is.
func (r *Actions) UpdateFrom(ctx context.Context, a *Action, u Update) (*Action, error) {
	if u.Retry && u.Phase.Terminal() {
		return nil, errs.Invalidf("action %s: a retry cannot start in a terminal phase", a.ActionKey)
	}
	if a.ID == 0 || a.ResourceVersion == AnyVersion {
		return nil, errs.Invalidf("action %s: UpdateFrom needs the action as read from the store", a.ActionKey)
	}
	var out *Action
	err := r.w.pipe(ctx, func(w *writeTx) error {
		if err := fenceFor(w, a.ActionKey, u); err != nil {
			return err
		}
		from := *a // written on a copy (applyFields): a stays as the caller holds it
		var err error
		out, err = write(w, &from, snapshotAttempt(a), u)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// snapshotAttempt is what a write needs of a's current attempt, known from
// a itself: an attempt enters every phase its action enters (Update's
// AttemptPhase only closes an attempt that Retry replaces, so the current
// one never differs), and it ends when its action does.
func snapshotAttempt(a *Action) currentAttempt {
	cur := currentAttempt{Phase: a.Phase}
	if a.Phase.Terminal() {
		ended := a.UpdatedAt
		if a.EndedAt != nil {
			ended = *a.EndedAt
		}
		cur.EndedAt = &ended
	}
	return cur
}

// fenceFor checks u's fence, once per batch.
func fenceFor(w *writeTx, key ActionKey, u Update) error {
	if u.Fence != 0 {
		if err := w.checkFence(u.Fence); err != nil {
			return fmt.Errorf("action %s: %w", key, err)
		}
	}
	return nil
}

// update is one action write: one read (the action with its current
// attempt), then the write (write).
func update(w *writeTx, key ActionKey, expected int64, u Update) (*Action, error) {
	if err := fenceFor(w, key, u); err != nil {
		return nil, err
	}
	a, cur, err := getWithAttempt(w.tx, key)
	if err != nil {
		return nil, err
	}
	if expected != AnyVersion && a.ResourceVersion != expected {
		return nil, fmt.Errorf("action %s is at version %d, not %d: %w", key, a.ResourceVersion, expected, errs.ErrConflict)
	}
	return write(w, a, cur, u)
}

// write applies u to a, the action as it is at a.ResourceVersion with its
// current attempt cur: the attempt's row if it changes, the action's row
// (only while it is still at that version), the change log and one
// statement per event, all sent as one on PostgreSQL (chain.go); the
// version and the fence are the batch's. It returns a as written.
func write(w *writeTx, a *Action, cur currentAttempt, u Update) (*Action, error) {
	key := a.ActionKey
	if u.Phase != phase.Unspecified && u.Phase != a.Phase && a.Phase.Terminal() {
		return nil, fmt.Errorf("action %s already ended in phase %d: %w", key, a.Phase, errs.ErrPrecondition)
	}
	at := db.Now()
	if !u.At.IsZero() {
		at = db.Time(u.At)
	}
	to := a.Phase
	if u.Phase != phase.Unspecified {
		to = u.Phase
	}
	attempts := a.Attempts
	if u.Retry {
		attempts++
	}
	// Every event names an attempt the action has once this write is done:
	// checked before anything is written.
	for _, e := range u.Events {
		if err := checkEvent(a.ActionKey, attempts, e); err != nil {
			return nil, err
		}
	}
	ch := w.chain()
	var history []Event
	if ev, err := updateAttempt(ch, a, cur, &u, at); err != nil {
		return nil, err
	} else if ev != nil {
		history = append(history, *ev)
	}

	rv := w.version()
	f := map[string]any{"updated_at": db.Now(), "resource_version": rv}
	if to != a.Phase {
		f["phase"] = to
	}
	if (to == phase.Initializing || to == phase.Running) && a.StartedAt == nil {
		f["started_at"] = at
	}
	if to.Terminal() && a.EndedAt == nil {
		f["ended_at"] = at
	}
	if u.Retry {
		f["attempts"] = attempts
		err := ch.add("", "INSERT INTO action_attempts (action_id, attempt, phase, started_at) VALUES (?, ?, ?, ?)", a.ID, attempts, to, at)
		if err != nil {
			return nil, fmt.Errorf("action %s: open attempt %d: %w", key, attempts, err)
		}
		history = append(history, u.takeEvent(attempts, to, at))
	}
	if u.ErrorInfo != nil {
		f["error_info"] = u.ErrorInfo
	}
	if u.AbortInfo != nil {
		f["abort_info"] = u.AbortInfo
	}
	if u.CacheStatus != nil {
		f["cache_status"] = *u.CacheStatus
	}
	if u.RecoveredFrom != "" {
		f["recovered_from"] = u.RecoveredFrom
	}
	if u.SignalInfo != nil {
		f["signal_info"] = u.SignalInfo
	}
	if u.AbortRequested && a.AbortRequestedAt == nil {
		f["abort_requested_at"] = at
	}
	if err := appendChange(ch, rv, ChangeModified, key, db.Now()); err != nil {
		return nil, err
	}
	for _, e := range u.Events { // reports within a phase
		e.Version = NextVersion
		history = append(history, e)
	}
	opened := *a
	opened.Attempts = attempts // the events may name the attempt this write opens
	if err := chainEvents(ch, &opened, history); err != nil {
		return nil, err
	}
	// The action's row goes last, with everything chained before it. The
	// version condition is belt and braces: the batch's hold on the
	// resource version row already serializes action writers.
	set, args := setClause(f)
	moved := fmt.Errorf("action %s changed concurrently: %w", key, errs.ErrConflict)
	err := ch.expect(1, moved, "UPDATE actions SET "+set+" WHERE id = ? AND resource_version = ?", append(args, a.ID, a.ResourceVersion)...)
	if err != nil && err != moved {
		err = fmt.Errorf("update action %s: %w", key, err)
	}
	if err != nil {
		return nil, err
	}
	applyFields(a, f)
	return a, nil
}

// setClause is the SET list of an UPDATE of the columns in f, in a fixed
// order, and its values.
func setClause(f map[string]any) (string, []any) {
	cols := slices.Sorted(maps.Keys(f))
	args := make([]any, len(cols))
	for i, c := range cols {
		args[i] = f[c]
		cols[i] += " = ?"
	}
	return strings.Join(cols, ", "), args
}

// applyFields mirrors the columns just written onto a, sparing every
// action write a second read of the row (writes are serialized, so this is
// a hot path).
func applyFields(a *Action, f map[string]any) {
	for col, v := range f {
		switch col {
		case "updated_at":
			a.UpdatedAt = v.(time.Time)
		case "resource_version":
			a.ResourceVersion = v.(int64)
		case "phase":
			a.Phase = v.(phase.Phase)
		case "started_at":
			t := v.(time.Time)
			a.StartedAt = &t
		case "ended_at":
			t := v.(time.Time)
			a.EndedAt = &t
		case "attempts":
			a.Attempts = v.(int32)
		case "error_info":
			a.ErrorInfo = v.([]byte)
		case "abort_info":
			a.AbortInfo = v.([]byte)
		case "cache_status":
			a.CacheStatus = v.(int32)
		case "recovered_from":
			a.RecoveredFrom = v.(string)
		case "abort_requested_at":
			t := v.(time.Time)
			a.AbortRequestedAt = &t
		case "signal_info":
			a.SignalInfo = v.([]byte)
		default:
			panic("store: applyFields does not know column " + col)
		}
	}
}

// updateAttempt applies u to the action's current attempt cur and returns
// the event of the phase it enters, if it enters one.
func updateAttempt(ch *chain, a *Action, cur currentAttempt, u *Update, at time.Time) (*Event, error) {
	to := u.AttemptPhase
	if to == phase.Unspecified && !u.Retry {
		to = u.Phase
	}
	f := map[string]any{}
	var entered *Event
	if to != phase.Unspecified && to != cur.Phase {
		f["phase"] = to
		ev := u.takeEvent(a.Attempts, to, at)
		entered = &ev
	}
	if cur.EndedAt == nil && (to.Terminal() || u.Retry) {
		f["ended_at"] = at
	}
	if u.ErrorInfo != nil {
		f["error_info"] = u.ErrorInfo
	}
	if u.OutputURI != "" {
		f["output_uri"] = u.OutputURI
	}
	if u.LogInfo != nil {
		f["log_info"] = u.LogInfo
	}
	if u.Cluster != "" {
		f["cluster"] = u.Cluster
	}
	if u.Owner != 0 {
		f["owner_token"] = u.Owner
	}
	if len(f) == 0 {
		return nil, nil
	}
	set, args := setClause(f)
	if err := ch.add("", "UPDATE action_attempts SET "+set+" WHERE action_id = ? AND attempt = ?", append(args, a.ID, a.Attempts)...); err != nil {
		return nil, fmt.Errorf("action %s: update attempt %d: %w", a.ActionKey, a.Attempts, err)
	}
	return entered, nil
}

// RequestAbort marks key and every descendant that has not ended for
// abort, in one transaction, each with its own resource version and
// change_log row. It returns the actions it marked (already-marked and
// ended ones are left alone).
func (r *Actions) RequestAbort(ctx context.Context, key ActionKey, abortInfo []byte) ([]Action, error) {
	var marked []Action
	err := r.w.replay(ctx, func(w *writeTx) error {
		marked = nil // a replay starts over
		tx := w.tx
		if _, err := getAction(tx, key); err != nil {
			return err
		}
		// A run's tree is small enough to walk in memory.
		var all []Action
		err := tx.Select("id, name, parent_name, phase, abort_requested_at").
			Where("org = ? AND project = ? AND domain = ? AND run_name = ?", key.Org, key.Project, key.Domain, key.RunName).
			Order("id").Find(&all).Error
		if err != nil {
			return fmt.Errorf("abort %s: %w", key, db.Translate(err))
		}
		children := map[string][]Action{}
		byName := map[string]Action{}
		for _, a := range all {
			byName[a.Name] = a
			if a.ParentName != nil {
				children[*a.ParentName] = append(children[*a.ParentName], a)
			}
		}
		queue := []Action{byName[key.Name]}
		for len(queue) > 0 {
			a := queue[0]
			queue = append(queue[1:], children[a.Name]...)
			if a.Phase.Terminal() || a.AbortRequestedAt != nil {
				continue
			}
			updated, err := update(w, key.RunKey.Action(a.Name), AnyVersion, Update{AbortRequested: true, AbortInfo: abortInfo})
			if err != nil {
				return err
			}
			marked = append(marked, *updated)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return marked, nil
}
