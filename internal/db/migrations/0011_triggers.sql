-- Triggers (TriggerService, and TaskService.DeployTask's triggers): a named
-- launch configuration of one task version, fired by the scheduler when it
-- has a schedule (automation_type TYPE_SCHEDULE) or by name through
-- CreateRun. The key is (org, project, domain, task_name, name); a deleted
-- trigger keeps its row (deleted_at) so a redeploy continues its revisions.
-- spec is a serialized flyteidl2.trigger.TriggerSpec and automation_spec a
-- flyteidl2.task.TriggerAutomationSpec, as last deployed.
CREATE TABLE triggers (
    id              {{.ID}},
    org             TEXT NOT NULL,
    project         TEXT NOT NULL,
    domain          TEXT NOT NULL,
    task_name       TEXT NOT NULL,
    name            TEXT NOT NULL,
    task_version    TEXT NOT NULL,
    revision        BIGINT NOT NULL,
    active          BOOLEAN NOT NULL,
    automation_type TEXT NOT NULL,
    spec            {{.Bytes}} NOT NULL,
    automation_spec {{.Bytes}} NOT NULL,
    description     TEXT NOT NULL DEFAULT '',
    deployed_by     TEXT NOT NULL DEFAULT '',
    updated_by      TEXT NOT NULL DEFAULT '',
    deployed_at     {{.Time}} NOT NULL,
    updated_at      {{.Time}} NOT NULL,
    -- When the current activation began (deployed active, or activated):
    -- a fixed rate without a start time counts from it, and nothing before
    -- it is ever due.
    active_since    {{.Time}} NOT NULL,
    -- The newest scheduled time the scheduler made a run for; firings
    -- continue after it.
    last_slot       {{.Time}},
    -- The latest run the trigger made (scheduled or by name).
    triggered_at    {{.Time}},
    deleted_at      {{.Time}},
    CONSTRAINT triggers_identity_key UNIQUE (org, project, domain, task_name, name)
);

-- ListTriggers of a project; the scheduler's pass over what it fires.
CREATE INDEX triggers_project_idx ON triggers (org, project, domain, updated_at, id);
CREATE INDEX triggers_scheduled_idx ON triggers (id) WHERE active AND deleted_at IS NULL AND automation_type = 'TYPE_SCHEDULE';

-- Which trigger made which run, and for which scheduled time (NULL for a
-- run by name). One row per run; a retried firing finds it there.
CREATE TABLE trigger_runs (
    org          TEXT NOT NULL,
    project      TEXT NOT NULL,
    domain       TEXT NOT NULL,
    run_name     TEXT NOT NULL,
    trigger_id   BIGINT NOT NULL REFERENCES triggers (id) ON DELETE CASCADE,
    revision     BIGINT NOT NULL,
    scheduled_at {{.Time}},
    created_at   {{.Time}} NOT NULL,
    PRIMARY KEY (org, project, domain, run_name)
);

CREATE INDEX trigger_runs_trigger_idx ON trigger_runs (trigger_id, created_at);
