package runstate

import (
	"context"

	"fmgr.dev/internal/store"
)

// childQueue is the queue of a task action enqueued under parent: the one
// its TaskAction names (queue= on its task or environment), else its run's
// (RunSpec.queue), with that queue's maxDepth. A queue the action names
// itself must be configured; a run's queue that is no longer configured
// (the configuration changed while the run was in flight) leaves the child
// on no queue rather than failing the run.
func (s *Service) childQueue(ctx context.Context, parent *store.Action, own string) (string, int, error) {
	if own != "" {
		q, err := s.queues.Resolve("action.task.queue", own)
		return q.Name, q.MaxDepth, err
	}
	if len(s.queues.All()) == 0 {
		return "", 0, nil // no queues, so the run names none that counts
	}
	root := parent
	if !parent.IsRoot() {
		r, err := s.store.Actions.Get(ctx, parent.RunKey.Action(store.RootName))
		if err != nil {
			return "", 0, err
		}
		root = r
	}
	q, ok := s.queues.Get(root.Queue)
	if !ok {
		return "", 0, nil
	}
	return q.Name, q.MaxDepth, nil
}
