-- Runs and actions (a run is its root action a0), their attempts and phase
-- history, and the change log that watches and the k8s-style API read.

CREATE TABLE actions (
    id                 {{.ID}},
    org                TEXT NOT NULL,
    project            TEXT NOT NULL,
    domain             TEXT NOT NULL,
    run_name           TEXT NOT NULL,
    name               TEXT NOT NULL,
    parent_name        TEXT,
    action_type        INTEGER NOT NULL DEFAULT 0,
    task_org           TEXT NOT NULL DEFAULT '',
    task_project       TEXT NOT NULL DEFAULT '',
    task_domain        TEXT NOT NULL DEFAULT '',
    task_name          TEXT NOT NULL DEFAULT '',
    task_version       TEXT NOT NULL DEFAULT '',
    task_type          TEXT NOT NULL DEFAULT '',
    short_name         TEXT NOT NULL DEFAULT '',
    environment_name   TEXT NOT NULL DEFAULT '',
    spec_digest        TEXT REFERENCES task_specs (digest),
    phase              INTEGER NOT NULL,
    attempts           INTEGER NOT NULL DEFAULT 0,
    input_uri          TEXT NOT NULL DEFAULT '',
    run_output_base    TEXT NOT NULL DEFAULT '',
    action_group       TEXT NOT NULL DEFAULT '',
    run_spec           {{.Bytes}},
    error_info         {{.Bytes}},
    abort_info         {{.Bytes}},
    abort_requested_at {{.Time}},
    cache_status       INTEGER NOT NULL DEFAULT 0,
    created_by         TEXT NOT NULL DEFAULT '',
    created_at         {{.Time}} NOT NULL,
    updated_at         {{.Time}} NOT NULL,
    started_at         {{.Time}},
    ended_at           {{.Time}},
    resource_version   BIGINT NOT NULL,
    CONSTRAINT actions_identity_key UNIQUE (org, project, domain, run_name, name),
    -- A child's parent lives in the same run; the root (parent_name NULL) is unchecked.
    CONSTRAINT actions_parent_fkey FOREIGN KEY (org, project, domain, run_name, parent_name)
        REFERENCES actions (org, project, domain, run_name, name) ON DELETE CASCADE
);

-- ListRuns: root actions of a project (or org) by created_at, optionally by phase or task.
CREATE INDEX actions_runs_idx ON actions (org, project, domain, created_at, id) WHERE parent_name IS NULL;
CREATE INDEX actions_org_runs_idx ON actions (org, created_at, id) WHERE parent_name IS NULL;
CREATE INDEX actions_runs_phase_idx ON actions (org, project, domain, phase, created_at, id) WHERE parent_name IS NULL;
CREATE INDEX actions_runs_task_idx ON actions (org, project, domain, task_name, created_at, id) WHERE parent_name IS NULL;
-- ListActions of a run, ListChildren of a parent.
CREATE INDEX actions_run_idx ON actions (org, project, domain, run_name, created_at, id);
CREATE INDEX actions_children_idx ON actions (org, project, domain, run_name, parent_name, created_at, id);
-- Executor recovery: everything not yet terminal (SUCCEEDED, FAILED, ABORTED, TIMED_OUT, RECOVERED).
CREATE INDEX actions_active_idx ON actions (id) WHERE phase NOT IN (5, 6, 7, 8, 10);

CREATE TABLE action_attempts (
    action_id  BIGINT NOT NULL REFERENCES actions (id) ON DELETE CASCADE,
    attempt    INTEGER NOT NULL,
    phase      INTEGER NOT NULL,
    started_at {{.Time}} NOT NULL,
    ended_at   {{.Time}},
    error_info {{.Bytes}},
    output_uri TEXT NOT NULL DEFAULT '',
    log_info   {{.Bytes}},
    cluster    TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (action_id, attempt)
);

CREATE TABLE phase_transitions (
    id          {{.ID}},
    action_id   BIGINT NOT NULL REFERENCES actions (id) ON DELETE CASCADE,
    attempt     INTEGER NOT NULL,
    phase       INTEGER NOT NULL,
    occurred_at {{.Time}} NOT NULL
);

CREATE INDEX phase_transitions_action_idx ON phase_transitions (action_id, attempt, id);

-- The one global resource version. Taking it (UPDATE ... RETURNING) locks the
-- row until commit, so versions become visible in the order they were handed
-- out and a watcher reading change_log past version N never misses one.
CREATE TABLE resource_version (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    value BIGINT NOT NULL
);

INSERT INTO resource_version (id, value) VALUES (1, 0);

-- One row per action change, written in the change's own transaction.
CREATE TABLE change_log (
    resource_version        BIGINT PRIMARY KEY,
    kind                    TEXT NOT NULL,
    op                      TEXT NOT NULL,
    org                     TEXT NOT NULL,
    project                 TEXT NOT NULL,
    domain                  TEXT NOT NULL,
    run_name                TEXT NOT NULL,
    name                    TEXT NOT NULL,
    object_resource_version BIGINT NOT NULL,
    occurred_at             {{.Time}} NOT NULL
);
