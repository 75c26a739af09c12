package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

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

// errNothingNew rolls back a RecordEvents whose events were all known.
var errNothingNew = errors.New("no new events")

// RecordEvents records events reported about the attempts of key, leaving
// the action row as it is (its phase is its executor's to write). Events
// already recorded under the same (attempt, phase, version) are ignored, so
// a reporter may send again what it is not sure arrived; recorded counts
// the new ones. Every event must name an existing attempt and a phase, and
// a version (NextVersion is not accepted here). New events append one
// change_log row so that watchers of the action see them.
func (r *Actions) RecordEvents(ctx context.Context, key ActionKey, evs []Event) (recorded int, err error) {
	for _, e := range evs {
		if e.Version < 0 {
			return 0, errs.Invalidf("event of %s attempt %d: a version is required", key, e.Attempt)
		}
	}
	err = db.WithTx(ctx, r.db, func(tx *gorm.DB) error {
		rv, err := nextVersion(tx) // first: every action writer locks in this order
		if err != nil {
			return err
		}
		a, err := getAction(tx, key)
		if err != nil {
			return err
		}
		if recorded, err = recordEvents(tx, a, evs); err != nil {
			return err
		}
		if recorded == 0 {
			return errNothingNew // hand the resource version back
		}
		c := Change{ResourceVersion: rv, Kind: KindEvent, Op: ChangeModified, Key: key,
			ObjectResourceVersion: a.ResourceVersion, OccurredAt: db.Now()}
		if err := tx.Create(&c).Error; err != nil {
			return fmt.Errorf("append change %d: %w", rv, db.Translate(err))
		}
		return nil
	})
	if errors.Is(err, errNothingNew) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return recorded, nil
}

// recordEvents is the one way events enter the history, for the
// executors' writes (Update, create) and the events service alike. It
// returns how many were new.
func recordEvents(tx *gorm.DB, a *Action, evs []Event) (int, error) {
	recorded := 0
	now := db.Now()
	for _, e := range evs {
		if e.Attempt < 1 || e.Attempt > a.Attempts {
			return 0, errs.NotFoundf("attempt %d of action %s (it has %d)", e.Attempt, a.ActionKey, a.Attempts)
		}
		if e.Phase == phase.Unspecified {
			return 0, errs.Invalidf("event of %s attempt %d: a phase is required", a.ActionKey, e.Attempt)
		}
		e.ID, e.ActionID, e.RecordedAt = 0, a.ID, now
		if e.OccurredAt.IsZero() {
			e.OccurredAt = now
		} else {
			e.OccurredAt = db.Time(e.OccurredAt)
		}
		if e.Version == NextVersion {
			var last *int32
			err := tx.Model(&Event{}).Select("MAX(version)").
				Where("action_id = ? AND attempt = ? AND phase = ?", a.ID, e.Attempt, e.Phase).Scan(&last).Error
			if err != nil {
				return 0, fmt.Errorf("action %s: event version: %w", a.ActionKey, db.Translate(err))
			}
			e.Version = 0
			if last != nil {
				e.Version = *last + 1
			}
		}
		res := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&e)
		if res.Error != nil {
			return 0, fmt.Errorf("action %s: record event: %w", a.ActionKey, db.Translate(res.Error))
		}
		recorded += int(res.RowsAffected)
	}
	return recorded, nil
}

// Events returns the history of key: every event of every attempt, by
// attempt, then in the order they happened.
func (r *Actions) Events(ctx context.Context, key ActionKey) ([]Event, error) {
	q := r.db.WithContext(ctx)
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
