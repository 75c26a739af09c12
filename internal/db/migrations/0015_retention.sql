-- Retention (internal/retention, `flyte-manager gc`): ended runs older than
-- their project/domain's retention are deleted with everything they own.
--
-- A pinned run is never collected, whatever its age; `flyte-manager gc pin`
-- and `unpin` write this table. One row per pinned run.
CREATE TABLE run_pins (
    org        TEXT NOT NULL,
    project    TEXT NOT NULL,
    domain     TEXT NOT NULL,
    run_name   TEXT NOT NULL,
    pinned_by  TEXT NOT NULL DEFAULT '',
    reason     TEXT NOT NULL DEFAULT '',
    created_at {{.Time}} NOT NULL,
    PRIMARY KEY (org, project, domain, run_name)
);

-- The collector's scan: ended runs, oldest end first.
CREATE INDEX actions_runs_ended_idx ON actions (ended_at, id) WHERE parent_name IS NULL AND ended_at IS NOT NULL;
-- Whether a task spec is still used once a run's actions are gone.
CREATE INDEX actions_spec_digest_idx ON actions (spec_digest);
CREATE INDEX tasks_spec_digest_idx ON tasks (spec_digest);
-- Whether content-addressed inputs are still some run's inputs.
CREATE INDEX actions_runs_input_idx ON actions (input_uri) WHERE parent_name IS NULL;
-- Which outputs of a run a cache entry keeps alive.
CREATE INDEX cache_outputs_output_idx ON cache_outputs (output_uri);

-- Code bundles the collector found unreferenced when it deleted the last
-- spec naming them, deleted once not_before passed (their upload plus
-- retention.inputGrace: the SDK reuses an upload it made for a day without
-- asking) if nothing references them by then.
CREATE TABLE gc_pending (
    uri        TEXT PRIMARY KEY,
    not_before {{.Time}} NOT NULL
);

CREATE INDEX gc_pending_due_idx ON gc_pending (not_before);
