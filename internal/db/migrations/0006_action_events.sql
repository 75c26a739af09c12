-- The one recorded history of every attempt: each phase an attempt entered
-- and every report about it (cluster events, log links, outputs), as the
-- executors and the events service record them. It replaces
-- phase_transitions, whose rows carry over as events without details.
--
-- (action_id, attempt, phase, version) is the reference's idempotency key:
-- an event recorded again is ignored. version tells apart reports of the
-- same phase (the executor's own transitions take the next free one).

CREATE TABLE action_events (
    id          {{.ID}},
    action_id   BIGINT NOT NULL REFERENCES actions (id) ON DELETE CASCADE,
    attempt     INTEGER NOT NULL,
    phase       INTEGER NOT NULL,
    version     INTEGER NOT NULL,
    occurred_at {{.Time}} NOT NULL,
    recorded_at {{.Time}} NOT NULL,
    reason      TEXT NOT NULL DEFAULT '',
    -- The serialized flyteidl2.workflow.ActionEvent as reported (NULL for
    -- transitions carried over from phase_transitions).
    info        {{.Bytes}},
    CONSTRAINT action_events_key UNIQUE (action_id, attempt, phase, version)
);

-- Details read one action's history in order.
CREATE INDEX action_events_history_idx ON action_events (action_id, attempt, occurred_at, id);

-- A phase entered twice in one attempt (e.g. QUEUED again after a lost
-- launch) becomes versions 0, 1, ... in the order it was recorded.
INSERT INTO action_events (action_id, attempt, phase, version, occurred_at, recorded_at, reason)
SELECT action_id, attempt, phase,
       ROW_NUMBER() OVER (PARTITION BY action_id, attempt, phase ORDER BY id) - 1,
       occurred_at, occurred_at, ''
FROM phase_transitions
ORDER BY id;

DROP INDEX phase_transitions_action_idx;

DROP TABLE phase_transitions;
