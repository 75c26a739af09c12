package store

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/phase"
)

// Actions is the repository of runs and actions, their attempts, event
// history and change log.
type Actions struct {
	db *gorm.DB
	w  writes
}

// q is the handle for a read made with ctx. Inside a batch (InTx) it is
// the batch's transaction as it is: a caller giving up must not cancel a
// statement of a transaction others share.
func (r *Actions) q(ctx context.Context) *gorm.DB {
	if r.w.in != nil {
		return r.db
	}
	return r.db.WithContext(ctx)
}

// OnCommit has fn called after every transaction of r's pool that committed
// a change to actions (one that appended to the change log), before the
// writers in it return: the change hub's wake-up, so that no writer has to
// remember to tell it. fn must not block. Repositories over a transaction of
// the caller's own (New(tx)) do not commit, so there it is never called;
// writes made inside InTx are told when their job commits.
func (r *Actions) OnCommit(fn func()) {
	c := r.w.c
	if c == nil {
		return
	}
	c.hooksMu.Lock()
	c.onCommit = append(c.onCommit, fn)
	c.hooksMu.Unlock()
}

// NewAction describes an action to create.
type NewAction struct {
	Key             ActionKey
	ParentName      string // "" for a run's root action
	ActionType      ActionType
	Task            TaskID
	TaskType        string
	ShortName       string
	EnvironmentName string
	SpecDigest      string
	Spec            []byte      // if not nil, stored under SpecDigest in the same transaction
	Phase           phase.Phase // initial phase, QUEUED if unset; a terminal one (a finished trace) also ends it
	InputURI        string
	RunOutputBase   string
	Group           string
	RunSpec         []byte // root only
	CacheKey        string // a discoverable task's cache key, as the SDK computed it
	CreatedBy       string
	// ConditionSpec is a condition action's serialized ConditionAction;
	// SignalInfo and RecoveredFrom a condition created with the value its
	// source run was signalled (recovery).
	ConditionSpec []byte
	SignalInfo    []byte
	RecoveredFrom string
	CreatedAt     time.Time // zero means now; a trace passes its start time
	EndedAt       time.Time // for an action created terminal; zero means CreatedAt

	// Queue is the named queue the action is routed to ("" for none).
	// With MaxDepth > 0 the insert is refused (errs.ErrTooLarge) when the
	// queue already holds MaxDepth actions that have not ended.
	Queue    string
	MaxDepth int
}

func (n *NewAction) validate() error {
	k := n.Key
	if k.Project == "" || k.Domain == "" || k.RunName == "" || k.Name == "" {
		return errs.Invalidf("action %s: project, domain, run name and action name are required", k)
	}
	if n.Phase == phase.Unspecified {
		n.Phase = phase.Queued
	}
	if n.Spec != nil && n.SpecDigest == "" {
		n.SpecDigest = SpecDigest(n.Spec)
	}
	return nil
}

// sameAs reports whether n re-submits what created a (retries of Enqueue).
func (n *NewAction) sameAs(a *Action) bool {
	parent := ""
	if a.ParentName != nil {
		parent = *a.ParentName
	}
	return parent == n.ParentName && a.ActionType == n.ActionType && a.Task == n.Task &&
		a.SpecDigest == n.SpecDigest && a.InputURI == n.InputURI &&
		a.RunOutputBase == n.RunOutputBase && a.Group == n.Group && bytes.Equal(a.RunSpec, n.RunSpec) &&
		bytes.Equal(a.ConditionSpec, n.ConditionSpec)
}

// CreateRun creates a run: its root action (named RootName), attempt 1 and
// the first change_log row. A run name already taken in the project and
// domain yields errs.ErrAlreadyExists.
func (r *Actions) CreateRun(ctx context.Context, n NewAction) (*Action, error) {
	if n.Key.Name == "" {
		n.Key.Name = RootName
	}
	if n.Key.Name != RootName || n.ParentName != "" {
		return nil, errs.Invalidf("a run's root action is named %q and has no parent", RootName)
	}
	a, _, err := r.create(ctx, n, func(*NewAction, *Action) error {
		return fmt.Errorf("run %s: %w", n.Key.RunKey, errs.ErrAlreadyExists)
	})
	return a, err
}

// CreateChild creates an action under ParentName in the same run. Creating
// the same action again with identical content returns the existing one
// and created=false; different content under the same name yields
// errs.ErrAlreadyExists. A missing parent yields errs.ErrNotFound.
func (r *Actions) CreateChild(ctx context.Context, n NewAction) (*Action, bool, error) {
	if n.ParentName == "" || n.ParentName == n.Key.Name {
		return nil, false, errs.Invalidf("action %s needs a parent other than itself", n.Key)
	}
	if len(n.RunSpec) > 0 {
		return nil, false, errs.Invalidf("action %s: only a run's root action carries a run spec", n.Key)
	}
	return r.create(ctx, n, func(n *NewAction, existing *Action) error {
		if !n.sameAs(existing) {
			return fmt.Errorf("action %s exists with different content: %w", n.Key, errs.ErrAlreadyExists)
		}
		return nil
	})
}

// create inserts n unless its key exists, in which case onExisting (given
// n with defaults filled in) decides between returning the existing row
// (nil) and failing.
func (r *Actions) create(ctx context.Context, n NewAction, onExisting func(*NewAction, *Action) error) (*Action, bool, error) {
	if err := n.validate(); err != nil {
		return nil, false, err
	}
	var out *Action
	created := false
	write := r.w.replay
	if n.Queue == "" || n.MaxDepth <= 0 { // nothing to admit: nothing to read first
		write = r.w.pipe
	}
	err := write(ctx, func(w *writeTx) error {
		out, created = nil, false // a replay starts over
		if w.rec != nil {
			a, err := createPiped(w, n)
			out, created = a, err == nil
			return err
		}
		tx := w.tx
		// On PostgreSQL the spec goes with the read, as one statement
		// (a round trip fewer in the batch); if the create then fails, it
		// rolls back with it.
		combine := n.Spec != nil && db.Dialect(tx) == db.Postgres
		existing, parentFound, err := getForCreate(tx, n, combine)
		if err != nil {
			return err
		}
		if existing != nil {
			out = existing
			return onExisting(&n, existing)
		}
		if n.ParentName != "" && !parentFound {
			return errs.NotFoundf("parent action %s of %s", n.ParentName, n.Key)
		}
		if err := admitToQueue(tx, n.Queue, n.MaxDepth); err != nil {
			return err
		}
		if n.Spec != nil && !combine {
			if err := putSpec(tx, n.SpecDigest, n.Spec); err != nil {
				return err
			}
		}
		rv := w.version()
		a := n.row(rv)
		q := tx.Clauses(clause.OnConflict{DoNothing: true})
		if a.SpecDigest == "" {
			q = q.Omit("spec_digest") // NULL, so the foreign key does not apply
		}
		res := q.Create(a)
		if res.Error != nil {
			return fmt.Errorf("create action %s: %w", n.Key, db.Translate(res.Error))
		}
		if res.RowsAffected == 0 { // lost a race to an identical key (another manager's batch)
			existing, err := getAction(tx, n.Key)
			if err != nil {
				return err
			}
			out = existing
			return onExisting(&n, existing)
		}
		// The attempt, the first event and the change go as one statement
		// on PostgreSQL (see chain).
		ch := newChain(tx)
		// A new action has no events yet: its first is version 0.
		first := Event{Attempt: 1, Phase: a.Phase, Version: 0, OccurredAt: a.CreatedAt}
		if err := chainEvents(ch, a, []Event{first}); err != nil {
			return err
		}
		if err := appendChange(ch, rv, ChangeAdded, a.ActionKey, a.UpdatedAt); err != nil {
			return err
		}
		if _, err := ch.exec("INSERT INTO action_attempts (action_id, attempt, phase, started_at, ended_at) VALUES (?, ?, ?, ?, ?)",
			a.ID, 1, a.Phase, a.CreatedAt, a.EndedAt); err != nil {
			return fmt.Errorf("create action %s: attempt: %w", n.Key, err)
		}
		out, created = a, true
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return out, created, nil
}

// getForCreate reads, in one query, the action n.Key if it exists and
// whether its parent (if it names one) does. With withSpec (PostgreSQL),
// the same statement stores n.Spec first, a data-modifying WITH part.
func getForCreate(tx *gorm.DB, n NewAction, withSpec bool) (existing *Action, parentFound bool, err error) {
	key, parent := n.Key, n.ParentName
	names := []string{key.Name}
	if parent != "" {
		names = append(names, parent)
	}
	var rows []Action
	if withSpec {
		if n.SpecDigest != SpecDigest(n.Spec) {
			return nil, false, errs.Invalidf("task spec digest %q does not match its content", n.SpecDigest)
		}
		err = tx.Raw(`WITH s1 AS (INSERT INTO task_specs (digest, spec, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING)
SELECT * FROM actions WHERE org = ? AND project = ? AND domain = ? AND run_name = ? AND name IN ?`,
			n.SpecDigest, n.Spec, db.Now(), key.Org, key.Project, key.Domain, key.RunName, names).Scan(&rows).Error
	} else {
		err = tx.Where("org = ? AND project = ? AND domain = ? AND run_name = ? AND name IN ?",
			key.Org, key.Project, key.Domain, key.RunName, names).Find(&rows).Error
	}
	if err != nil {
		return nil, false, fmt.Errorf("action %s: %w", key, db.Translate(err))
	}
	for i := range rows {
		switch rows[i].Name {
		case key.Name:
			existing = &rows[i]
		case parent:
			parentFound = true
		}
	}
	return existing, parentFound, nil
}

// row is the actions row for n at resource version rv.
func (n *NewAction) row(rv int64) *Action {
	now := db.Now()
	createdAt := now
	if !n.CreatedAt.IsZero() {
		createdAt = db.Time(n.CreatedAt)
	}
	a := &Action{
		ActionKey:       n.Key,
		ActionType:      n.ActionType,
		Task:            n.Task,
		TaskType:        n.TaskType,
		ShortName:       n.ShortName,
		EnvironmentName: n.EnvironmentName,
		SpecDigest:      n.SpecDigest,
		Phase:           n.Phase,
		Attempts:        1,
		InputURI:        n.InputURI,
		RunOutputBase:   n.RunOutputBase,
		Group:           n.Group,
		RunSpec:         n.RunSpec,
		CacheKey:        n.CacheKey,
		Queue:           n.Queue,
		CreatedBy:       n.CreatedBy,
		ConditionSpec:   n.ConditionSpec,
		SignalInfo:      n.SignalInfo,
		RecoveredFrom:   n.RecoveredFrom,
		CreatedAt:       createdAt,
		UpdatedAt:       now,
		ResourceVersion: rv,
	}
	if n.ParentName != "" {
		parent := n.ParentName
		a.ParentName = &parent
	}
	if n.Phase.Terminal() {
		ended := createdAt
		if !n.EndedAt.IsZero() {
			ended = db.Time(n.EndedAt)
		}
		a.StartedAt, a.EndedAt = &createdAt, &ended
	}
	return a
}

// Get returns one action (a run: RunKey.Action(RootName)).
func (r *Actions) Get(ctx context.Context, key ActionKey) (*Action, error) {
	return getAction(r.q(ctx), key)
}

var getActionQuery = "SELECT " + actionColumns("") +
	" FROM actions WHERE org = ? AND project = ? AND domain = ? AND run_name = ? AND name = ?"

func getAction(tx *gorm.DB, key ActionKey) (*Action, error) {
	rows, err := scanActions(tx, getActionQuery, key.Org, key.Project, key.Domain, key.RunName, key.Name)
	if err != nil {
		return nil, fmt.Errorf("action %s: %w", key, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("action %s: %w", key, errs.ErrNotFound)
	}
	return &rows[0], nil
}

// currentAttempt is what a write needs of an action's current attempt.
type currentAttempt struct {
	Phase   phase.Phase
	EndedAt *time.Time
}

var getWithAttemptQuery = "SELECT " + actionColumns("actions") + `, action_attempts.phase, action_attempts.ended_at
FROM actions JOIN action_attempts ON action_attempts.action_id = actions.id AND action_attempts.attempt = actions.attempts
WHERE actions.org = ? AND actions.project = ? AND actions.domain = ? AND actions.run_name = ? AND actions.name = ?`

// getWithAttempt reads the action key and its current attempt in one query.
func getWithAttempt(tx *gorm.DB, key ActionKey) (*Action, currentAttempt, error) {
	var a *Action
	var cur currentAttempt
	err := queryRows(tx, func(rows *sql.Rows) error {
		a = &Action{}
		return rows.Scan(append(actionDest(a), intCol[phase.Phase]{&cur.Phase}, optTimeCol{&cur.EndedAt})...)
	}, getWithAttemptQuery, key.Org, key.Project, key.Domain, key.RunName, key.Name)
	if err != nil {
		return nil, currentAttempt{}, fmt.Errorf("action %s: %w", key, err)
	}
	if a == nil {
		a, err := getAction(tx, key) // missing, or (never seen) without its current attempt
		if err != nil {
			return nil, currentAttempt{}, err
		}
		return nil, currentAttempt{}, fmt.Errorf("action %s: attempt %d: %w", key, a.Attempts, errs.ErrNotFound)
	}
	return a, cur, nil
}

// Attempts returns the action's attempts, first to last.
func (r *Actions) Attempts(ctx context.Context, key ActionKey) ([]Attempt, error) {
	q := r.q(ctx)
	a, err := getAction(q, key)
	if err != nil {
		return nil, err
	}
	var out []Attempt
	if err := q.Where("action_id = ?", a.ID).Order("attempt").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("attempts of %s: %w", key, db.Translate(err))
	}
	return out, nil
}
