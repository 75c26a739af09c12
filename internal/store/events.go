package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/phase"
)

// Event is a row of action_events: one report about an attempt, either a
// phase it entered or news within a phase (cluster events, log links). The
// history of an action is its events in order; phase transitions are where
// the phase changes from one event to the next.
type Event struct {
	ID       int64 `gorm:"primaryKey"`
	ActionID int64
	Attempt  int32
	Phase    phase.Phase
	// Version tells apart reports of the same phase of one attempt;
	// NextVersion lets the store take the next free one.
	Version    int32
	OccurredAt time.Time
	RecordedAt time.Time
	// Reason says why, in a few words (a waiting reason, a retry's cause).
	Reason string
	// Info is the serialized flyteidl2.workflow.ActionEvent as reported;
	// the store keeps it opaque. Nil for transitions recorded before events
	// carried details.
	Info []byte
}

func (Event) TableName() string { return "action_events" }

// NextVersion, as an Event's Version, records it as the next report of its
// phase: the executor's own transitions and reports, which its one-writer
// fencing already keeps from being recorded twice.
const NextVersion int32 = -1

// KindEvent is the change_log kind of an event recorded without a change
// of the action row (the events service's): watchers of the action's
// details wake up for it; its object version is the action's unchanged one.
const KindEvent = "event"

// RecordEvents records events reported about the attempts of key, leaving
// the action row as it is (its phase is its executor's to write). Events
// already recorded under the same (attempt, phase, version) are ignored, so
// a reporter may send again what it is not sure arrived; recorded counts
// the new ones. Every event must name an existing attempt and a phase, and
// a version (NextVersion is not accepted here); a new one must agree with
// its attempt and fit within lim (reports.go). New events append one
// change_log row so that watchers of the action see them.
func (r *Actions) RecordEvents(ctx context.Context, key ActionKey, evs []Event, lim ReportLimits) (recorded int, err error) {
	for _, e := range evs {
		if e.Version < 0 {
			return 0, errs.Invalidf("event of %s attempt %d: a version is required", key, e.Attempt)
		}
	}
	err = r.w.replay(ctx, func(w *writeTx) error {
		recorded = 0 // a replay starts over
		a, err := getAction(w.tx, key)
		if err != nil {
			return err
		}
		news, err := admitReports(w.tx, a, evs, lim)
		if err != nil {
			return err
		}
		if recorded, err = recordEvents(w.tx, a, news); err != nil || recorded == 0 {
			return err // nothing new: no version taken, no change
		}
		rv := w.version()
		c := Change{ResourceVersion: rv, Kind: KindEvent, Op: ChangeModified, Key: key,
			ObjectResourceVersion: a.ResourceVersion, OccurredAt: db.Now()}
		if err := w.tx.Create(&c).Error; err != nil {
			return fmt.Errorf("append change %d: %w", rv, db.Translate(err))
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return recorded, nil
}

// checkEvent is what every event of an action with attempts attempts must
// satisfy.
func checkEvent(key ActionKey, attempts int32, e Event) error {
	if e.Attempt < 1 || e.Attempt > attempts {
		return errs.NotFoundf("attempt %d of action %s (it has %d)", e.Attempt, key, attempts)
	}
	if e.Phase == phase.Unspecified {
		return errs.Invalidf("event of %s attempt %d: a phase is required", key, e.Attempt)
	}
	return nil
}

// recordEvents is the one way events enter the history, for the
// executors' writes (Update, create) and the events service alike. It
// returns how many were new. Each event is one INSERT: one the store
// numbers (NextVersion) takes the next free version of its attempt and
// phase in the same statement.
func recordEvents(tx *gorm.DB, a *Action, evs []Event) (int, error) {
	if err := checkEvents(a, evs); err != nil {
		return 0, err
	}
	recorded := 0
	now := db.Now()
	for _, e := range evs {
		_, sql, args := eventInsert(a, e, now)
		res := tx.Exec(sql, args...)
		if res.Error != nil {
			return 0, fmt.Errorf("action %s: record event: %w", a.ActionKey, db.Translate(res.Error))
		}
		recorded += int(res.RowsAffected)
	}
	return recorded, nil
}

// chainEvents is recordEvents for a write that does not count them: the
// inserts join ch.
func chainEvents(ch *chain, a *Action, evs []Event) error {
	if err := checkEvents(a, evs); err != nil {
		return err
	}
	now := db.Now()
	for _, e := range evs {
		key, sql, args := eventInsert(a, e, now)
		if err := ch.add(key, sql, args...); err != nil {
			return fmt.Errorf("action %s: record event: %w", a.ActionKey, err)
		}
	}
	return nil
}

func checkEvents(a *Action, evs []Event) error {
	for _, e := range evs { // all checked before any is written
		if err := checkEvent(a.ActionKey, a.Attempts, e); err != nil {
			return err
		}
	}
	return nil
}

// eventInsert is the statement that records e, and its chain key: inserts
// of one attempt and phase read each other's versions.
func eventInsert(a *Action, e Event, now time.Time) (key, sql string, args []any) {
	at := now
	if !e.OccurredAt.IsZero() {
		at = db.Time(e.OccurredAt)
	}
	key = fmt.Sprintf("event %d %d", e.Attempt, e.Phase)
	if e.Version == NextVersion {
		return key, `INSERT INTO action_events (action_id, attempt, phase, version, occurred_at, recorded_at, reason, info)
SELECT ?, ?, ?, COALESCE(MAX(version) + 1, 0), ?, ?, ?, ? FROM action_events WHERE action_id = ? AND attempt = ? AND phase = ?`,
			[]any{a.ID, e.Attempt, e.Phase, at, now, e.Reason, e.Info, a.ID, e.Attempt, e.Phase}
	}
	return key, `INSERT INTO action_events (action_id, attempt, phase, version, occurred_at, recorded_at, reason, info)
VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (action_id, attempt, phase, version) DO NOTHING`,
		[]any{a.ID, e.Attempt, e.Phase, e.Version, at, now, e.Reason, e.Info}
}

// Events returns the history of key: every event of every attempt, by
// attempt, then in the order they happened.
func (r *Actions) Events(ctx context.Context, key ActionKey) ([]Event, error) {
	q := r.q(ctx)
	a, err := getAction(q, key)
	if err != nil {
		return nil, err
	}
	var out []Event
	if err := q.Where("action_id = ?", a.ID).Order("attempt, occurred_at, id").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("events of %s: %w", key, db.Translate(err))
	}
	return out, nil
}

// takeEvent is the event for attempt entering p at at: the one the writer
// described in u (matched by attempt and phase, and removed from it), or a
// bare one.
func (u *Update) takeEvent(attempt int32, p phase.Phase, at time.Time) Event {
	for i, e := range u.Events {
		if e.Attempt == attempt && e.Phase == p {
			u.Events = append(u.Events[:i:i], u.Events[i+1:]...)
			if e.OccurredAt.IsZero() {
				e.OccurredAt = at
			}
			e.Version = NextVersion
			return e
		}
	}
	return Event{Attempt: attempt, Phase: p, Version: NextVersion, OccurredAt: at}
}
