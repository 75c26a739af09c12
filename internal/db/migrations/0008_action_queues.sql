-- Named queues: the queue an action was routed to ('' for none), as it was
-- resolved at submit (the action's own queue, else its run's). Admission
-- counts the actions of a queue that have not ended, inside the
-- transaction that inserts one more, so the count is always the
-- database's, across restarts and replicas.

ALTER TABLE actions ADD COLUMN queue TEXT NOT NULL DEFAULT '';

-- Depth and in-flight of a queue: its actions that are not terminal
-- (SUCCEEDED, FAILED, ABORTED, TIMED_OUT, RECOVERED), by phase.
CREATE INDEX actions_queue_active_idx ON actions (queue, phase) WHERE queue <> '' AND phase NOT IN (5, 6, 7, 8, 10);
