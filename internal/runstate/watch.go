package runstate

import (
	"context"
	"errors"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// Every watch subscribes first, then takes its snapshot, then follows the
// subscription: a change committed in between is delivered (maybe twice,
// never lost). A watcher that falls behind is resynced with a new snapshot.

// Watches use the action row each change comes with (Change.Action, read
// by the hub once for all its watchers) instead of reading it again. That
// row may be older than a snapshot the watcher took after the hub read it,
// so every watch keeps the newest resource version it sent per action and
// drops what is older. It may also be newer than the change, when the
// action changed again before the hub read the change: the watches that
// show several actions take a row only with its own change (rowOf), so
// that they show the actions in the order they changed.

// errHubClosed ends watches when the manager shuts down.
var errHubClosed = errors.New("the manager is shutting down")

// rowOf is the action as change c left it, for the watches that show
// several actions; it is read again only when the hub had no row (the
// action is gone: the read reports so). It is nil when c is superseded
// (store.Change.Superseded): the row belongs to a later change of the
// action, which reaches the same subscription (the filters choose by
// action and kind, and it has the same row), and taken now it would show
// the action ahead of the changes in between: a child running under a
// parent still queued, when the parent had finished first.
func (s *Service) rowOf(ctx context.Context, c store.Change) (*store.Action, error) {
	switch {
	case c.Superseded():
		return nil, nil
	case c.Action != nil:
		return c.Action, nil
	}
	return s.store.Actions.Get(ctx, c.Key)
}

// newest remembers the highest resource version seen per action.
type newest map[store.ActionKey]int64

// fresh reports whether a is newer than every row of it seen before, and
// remembers it.
func (n newest) fresh(a *store.Action) bool {
	if v, ok := n[a.ActionKey]; ok && a.ResourceVersion <= v {
		return false
	}
	n[a.ActionKey] = a.ResourceVersion
	return true
}

// next waits for the subscription's next change. resync is true when the
// subscriber fell behind and must take a new snapshot.
func next(ctx context.Context, sub *Subscription) (c store.Change, resync bool, err error) {
	select {
	case <-ctx.Done():
		return c, false, ctx.Err()
	case c, ok := <-sub.C:
		if !ok {
			if sub.Overflowed() {
				return c, true, nil
			}
			return c, false, errs.ErrUnavailable
		}
		return c, false, nil
	}
}

// WatchChildren streams the children of parent as ActionUpdates: one per
// existing child, then the sentinel, then every phase change of every
// child, including QUEUED and the terminal one (with output_uri and error).
func (s *Service) WatchChildren(ctx context.Context, parent store.ActionKey, send func(*workflow.ActionUpdate) error, sentinel func() error) error {
	if _, err := s.Get(ctx, parent); err != nil {
		return err
	}
	seen := newest{}
	sent := map[string]phase.Phase{} // by child name: the phase sent last
	deliver := func(a *store.Action) error {
		if a == nil || a.ParentName == nil || *a.ParentName != parent.Name || !seen.fresh(a) {
			return nil
		}
		if p, ok := sent[a.Name]; ok && p == a.Phase {
			return nil
		}
		out, err := s.resultDir(ctx, a)
		if err != nil {
			return err
		}
		sent[a.Name] = a.Phase
		return send(UpdateOf(a, out))
	}
	first := true
	for {
		sub := s.hub.Subscribe(ForRun(parent.RunKey))
		err := s.eachChild(ctx, parent, deliver)
		if err == nil && first {
			err = sentinel()
			first = false
		}
		for err == nil {
			var c store.Change
			var resync bool
			if c, resync, err = next(ctx, sub); err != nil || resync {
				break
			}
			if c.Key.Name == parent.Name {
				continue
			}
			var a *store.Action
			if a, err = s.rowOf(ctx, c); err == nil {
				err = deliver(a)
			}
		}
		sub.Close()
		if err != nil {
			return err
		}
	}
}

func (s *Service) eachChild(ctx context.Context, parent store.ActionKey, fn func(*store.Action) error) error {
	return store.EachAction(store.MaxPageSize, func(p store.Page) ([]store.Action, string, error) {
		return s.store.Actions.ListChildren(ctx, parent, p)
	}, fn)
}

// resultDir is where a finished action's outputs are: the recorded
// directory for traces, the current attempt's output dir for tasks.
func (s *Service) resultDir(ctx context.Context, a *store.Action) (string, error) {
	if !a.Phase.Terminal() || a.ActionType == store.ActionTypeCondition {
		return "", nil // a condition's value travels inline (UpdateOf)
	}
	if a.ActionType == store.ActionTypeTrace {
		return s.outputURI(ctx, a)
	}
	return OutputDir(a, a.Attempts), nil
}

// WatchAction streams an action's details: now, then after every change,
// and ends after the terminal one.
func (s *Service) WatchAction(ctx context.Context, key store.ActionKey, send func(*workflow.ActionDetails) error) error {
	return s.follow(ctx, key, func(a *store.Action) error {
		d, err := s.Details(ctx, a)
		if err != nil {
			return err
		}
		return send(d)
	})
}

// WatchRun is WatchAction for a run's root, sending RunDetails.
func (s *Service) WatchRun(ctx context.Context, run store.RunKey, send func(*workflow.RunDetails) error) error {
	return s.follow(ctx, run.Action(store.RootName), func(a *store.Action) error {
		d, err := s.runDetails(ctx, a)
		if err != nil {
			return err
		}
		return send(d)
	})
}

func (s *Service) follow(ctx context.Context, key store.ActionKey, emit func(*store.Action) error) error {
	for {
		sub := s.hub.Subscribe(ForAction(key))
		done, err := s.followOnce(ctx, sub, key, emit)
		sub.Close()
		if done || err != nil {
			return err
		}
	}
}

// followOnce emits the current state and every change until terminal
// (done) or until the subscription must be resynced.
// An event recorded without a change of the action row (the events
// service's) also makes a new snapshot: the details show the history.
func (s *Service) followOnce(ctx context.Context, sub *Subscription, key store.ActionKey, emit func(*store.Action) error) (bool, error) {
	a, err := s.Get(ctx, key)
	if err != nil {
		return false, err
	}
	if err := emit(a); err != nil {
		return false, err
	}
	last := a.ResourceVersion
	for !a.Phase.Terminal() {
		c, resync, err := next(ctx, sub)
		if err != nil || resync {
			return false, err
		}
		newEvent := c.Kind == store.KindEvent
		row := c.Action
		if row == nil || (newEvent && row.ResourceVersion < last) {
			// Gone, or an event to show with a row older than the one
			// shown: read the action as it is.
			if row, err = s.Get(ctx, key); err != nil {
				return false, err
			}
		}
		if row.ResourceVersion > last || newEvent {
			if err := emit(row); err != nil {
				return false, err
			}
			a, last = row, max(last, row.ResourceVersion)
		}
	}
	return true, nil
}

// WatchRuns streams the runs of a scope: the newest page first, then every
// change to a run's root. The scope is ListRuns': the org always (empty is
// the default org, not any org), project, domain and task when set.
func (s *Service) WatchRuns(ctx context.Context, f store.RunFilter, send func([]*workflow.Run) error) error {
	match := func(c store.Change) bool {
		return c.Kind == store.KindAction && c.Key.Name == store.RootName && c.Key.Org == f.Org &&
			(f.Project == "" || c.Key.Project == f.Project) && (f.Domain == "" || c.Key.Domain == f.Domain)
	}
	ofTask := func(a *store.Action) bool {
		return (f.TaskName == "" || a.Task.Name == f.TaskName) && (f.TaskVersion == "" || a.Task.Version == f.TaskVersion)
	}
	for {
		sub := s.hub.Subscribe(Matching(match))
		seen := newest{}
		rows, _, err := s.store.Actions.ListRuns(ctx, f, store.Page{Limit: 100})
		if err == nil {
			runs := make([]*workflow.Run, len(rows))
			for i := range rows {
				seen.fresh(&rows[i])
				runs[i] = &workflow.Run{Action: ActionOf(&rows[i])}
			}
			err = send(runs)
		}
		for err == nil {
			var c store.Change
			var resync bool
			if c, resync, err = next(ctx, sub); err != nil || resync {
				break
			}
			var a *store.Action
			if a, err = s.rowOf(ctx, c); err == nil && a != nil && ofTask(a) && seen.fresh(a) {
				err = send([]*workflow.Run{{Action: ActionOf(a)}})
				if a.Phase.Terminal() {
					// The rows that follow come from later reads: this
					// run's entry is not needed to drop an older one, and
					// a stream open for days must not keep every run.
					delete(seen, a.ActionKey)
				}
			}
		}
		sub.Close()
		if err != nil {
			return err
		}
	}
}

// WatchActions streams every action of a run, then every change, marking
// which ones meet the request's filters and counting the phases of each
// one's descendants (actiontree.go). A change of phase is also sent for
// every ancestor, whose counts it changed.
func (s *Service) WatchActions(ctx context.Context, run store.RunKey, filters []*common.Filter, send func([]*workflow.EnrichedAction) error) error {
	match, err := actionFilter(filters)
	if err != nil {
		return err
	}
	if _, err := s.Get(ctx, run.Action(store.RootName)); err != nil {
		return err
	}
	for {
		sub := s.hub.Subscribe(ForRun(run))
		seen := newest{}
		tree := newActionTree(match)
		// The whole run is read before the first message, in one snapshot:
		// a page's counts need the actions of the pages after it, and a
		// later page must not show a child ahead of its parent.
		var order []string
		err = s.store.Actions.EachOfRun(ctx, run, func(a *store.Action) error {
			if seen.fresh(a) {
				tree.put(a)
				order = append(order, a.Name)
			}
			return nil
		})
		for len(order) > 0 && err == nil {
			n := min(len(order), store.MaxPageSize)
			batch := make([]*workflow.EnrichedAction, n)
			for i, name := range order[:n] {
				batch[i] = tree.enriched(name)
			}
			err, order = send(batch), order[n:]
		}
		for err == nil {
			var c store.Change
			var resync bool
			if c, resync, err = next(ctx, sub); err != nil || resync {
				break
			}
			var a *store.Action
			if a, err = s.rowOf(ctx, c); err == nil && a != nil && seen.fresh(a) {
				if names := tree.put(a); len(names) > 0 {
					err = send(tree.batch(names))
				}
			}
		}
		sub.Close()
		if err != nil {
			return err
		}
	}
}
