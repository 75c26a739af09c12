package runstate

import (
	"context"

	"fmgr.dev/internal/store"
)

// The run state as the executors and the events service read and write it:
// action rows, their attempts and history, and the executor's status
// writes. Callers outside this package go through these and never hold the
// store: every write here commits through it, and its commit wakes the
// watchers (Actions.OnCommit), so no caller has a notification to forget.

// GetWithParent returns an action and its parent's state (nil for a root),
// read in one query.
func (s *Service) GetWithParent(ctx context.Context, key store.ActionKey) (*store.Action, *store.ParentState, error) {
	return s.store.Actions.GetWithParent(ctx, key) // its errors name the action
}

// Attempts returns an action's attempts, in order.
func (s *Service) Attempts(ctx context.Context, key store.ActionKey) ([]store.Attempt, error) {
	return s.store.Actions.Attempts(ctx, key)
}

// Events returns an action's recorded history, in order.
func (s *Service) Events(ctx context.Context, key store.ActionKey) ([]store.Event, error) {
	return s.store.Actions.Events(ctx, key)
}

// ListChildren returns a page of parent's children as stored.
func (s *Service) ListChildren(ctx context.Context, parent store.ActionKey, page store.Page) ([]store.Action, string, error) {
	return s.store.Actions.ListChildren(ctx, parent, page)
}

// ListActionRows returns a page of the actions of run that f matches, as
// stored (ListActions is the API's view of the same).
func (s *Service) ListActionRows(ctx context.Context, run store.RunKey, f store.ActionFilter, page store.Page) ([]store.Action, string, error) {
	return s.store.Actions.ListActions(ctx, run, f, page)
}

// ListUnfinished returns a page of the actions, of every run, that have not
// ended: what an executor looks at when it takes over or may have missed news.
func (s *Service) ListUnfinished(ctx context.Context, page store.Page) ([]store.Action, string, error) {
	return s.store.Actions.ListNonTerminal(ctx, page)
}

// SpecStored returns nil when a TaskSpec is stored under digest, whatever it
// holds: a spec that Spec cannot read although it is stored is broken, where
// one that could not be read at all may only be unreachable.
func (s *Service) SpecStored(ctx context.Context, digest string) error {
	_, err := s.store.Tasks.GetSpec(ctx, digest)
	return err
}

// Update writes u to an action whose version is still expected
// (store.AnyVersion: whatever it is; errs.ErrConflict when it moved), and
// returns the action as written. It is how the executor records status.
func (s *Service) Update(ctx context.Context, key store.ActionKey, expected int64, u store.Update) (*store.Action, error) {
	return s.store.Actions.Update(ctx, key, expected, u)
}

// UpdateFrom is Update from a, the action as the caller last read or wrote
// it: the write starts from a instead of reading the row again, and fails
// with errs.ErrConflict when the row moved since (store.Actions.UpdateFrom).
func (s *Service) UpdateFrom(ctx context.Context, a *store.Action, u store.Update) (*store.Action, error) {
	return s.store.Actions.UpdateFrom(ctx, a, u)
}

// CreateRecord creates a child action as n describes it, without telling the
// executor: for the records the executor makes itself (a recovered trace,
// created ended). It also returns whether the action is new.
func (s *Service) CreateRecord(ctx context.Context, n store.NewAction) (*store.Action, bool, error) {
	return s.store.Actions.CreateChild(ctx, n)
}

// Reported is what a reporter said about one action's attempts.
type Reported struct {
	Key    store.ActionKey
	Events []store.Event
}

// RecordEvents adds reported events to the actions' histories in one
// transaction: all of them, or, when one cannot be recorded (one that
// contradicts its attempt, or past lim), none. Events already recorded are
// skipped (recording is idempotent).
func (s *Service) RecordEvents(ctx context.Context, reports []Reported, lim store.ReportLimits) error {
	return s.store.InTx(ctx, func(tx *store.Store) error {
		for _, r := range reports {
			if _, err := tx.Actions.RecordEvents(ctx, r.Key, r.Events, lim); err != nil {
				return err
			}
		}
		return nil
	})
}

// Leases are the executor lease rows: which manager may write executor
// status. Every status write carries the holder's token (store.Update.Fence).
func (s *Service) Leases() *store.Leases { return s.store.Leases }
