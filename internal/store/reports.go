package store

import (
	"fmt"

	"gorm.io/gorm"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/phase"
)

// What a reporter (the events service) may add to an action's history.
// The action row and its attempt rows are the executor's to write: a
// report adds news about the phase an attempt is in and never decides a
// phase. So a report that names another phase than the attempt's recorded
// one (a FAILED while it runs or after it SUCCEEDED, a RUNNING while it is
// QUEUED) is refused, and so is anything new about an attempt that ended:
// its history is closed. The executors record through Update and create,
// never through here, so none of this refuses them.

// ReportLimits bound what reports may add to one attempt's history
// (configuration events.*); the executors' own events count towards them.
type ReportLimits struct {
	MaxPerAttempt   int   // events
	MaxAttemptBytes int64 // their serialized details (Info), together
}

// eventID is what makes an event one: recording is idempotent on it.
type eventID struct {
	attempt int32
	phase   phase.Phase
	version int32
}

// admitReports returns the events of evs that are new to a's history, in
// order, or the reason they may not be recorded (none then is). An event
// recorded already, or earlier in evs, is skipped whatever the attempt's
// state: a reporter unsure that it arrived may send it again.
func admitReports(tx *gorm.DB, a *Action, evs []Event, lim ReportLimits) ([]Event, error) {
	if err := checkEvents(a, evs); err != nil {
		return nil, err
	}
	var attempts []Attempt
	if err := tx.Where("action_id = ?", a.ID).Find(&attempts).Error; err != nil {
		return nil, fmt.Errorf("attempts of %s: %w", a.ActionKey, db.Translate(err))
	}
	byNumber := map[int32]*Attempt{}
	for i := range attempts {
		byNumber[attempts[i].Attempt] = &attempts[i]
	}
	var rows []struct {
		Attempt int32
		Phase   phase.Phase
		Version int32
		Size    int64
	}
	err := tx.Raw("SELECT attempt, phase, version, COALESCE(LENGTH(info), 0) AS size FROM action_events WHERE action_id = ?", a.ID).
		Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("events of %s: %w", a.ActionKey, db.Translate(err))
	}
	seen := make(map[eventID]bool, len(rows))
	count, size := map[int32]int{}, map[int32]int64{}
	for _, r := range rows {
		seen[eventID{r.Attempt, r.Phase, r.Version}] = true
		count[r.Attempt]++
		size[r.Attempt] += r.Size
	}
	var out []Event
	for _, e := range evs {
		id := eventID{e.Attempt, e.Phase, e.Version}
		if seen[id] {
			continue
		}
		seen[id] = true
		at := byNumber[e.Attempt]
		if at == nil { // checkEvents saw it in a.Attempts: the row is missing
			return nil, errs.NotFoundf("attempt %d of action %s", e.Attempt, a.ActionKey)
		}
		if at.EndedAt != nil || at.Phase.Terminal() {
			return nil, fmt.Errorf("attempt %d of action %s ended %s: its history is closed to reports: %w",
				e.Attempt, a.ActionKey, at.Phase, errs.ErrPrecondition)
		}
		if e.Phase != at.Phase {
			return nil, fmt.Errorf("attempt %d of action %s is %s, an event of phase %s contradicts it (only its executor records a new phase): %w",
				e.Attempt, a.ActionKey, at.Phase, e.Phase, errs.ErrPrecondition)
		}
		count[e.Attempt]++
		size[e.Attempt] += int64(len(e.Info))
		if count[e.Attempt] > lim.MaxPerAttempt {
			return nil, fmt.Errorf("attempt %d of action %s: its history may hold at most %d events (events.maxPerAttempt): %w",
				e.Attempt, a.ActionKey, lim.MaxPerAttempt, errs.ErrTooLarge)
		}
		if size[e.Attempt] > lim.MaxAttemptBytes {
			return nil, fmt.Errorf("attempt %d of action %s: its history may hold at most %d bytes of event details (events.maxAttemptBytes): %w",
				e.Attempt, a.ActionKey, lim.MaxAttemptBytes, errs.ErrTooLarge)
		}
		out = append(out, e)
	}
	return out, nil
}
