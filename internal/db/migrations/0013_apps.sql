-- Apps of the App service (app/). spec is the App's Spec exactly as the
-- client sent it (clients compare it and send it back); meta is its Meta
-- without the id and revision, which have columns; status is its Status
-- with the conditions, newest last. phase is the last condition's
-- deployment status and created_by the spec's creator subject, for the
-- listing's filters. version changes with every write of the row (status
-- reports included) and guards read-modify-write; revision changes only
-- when the spec does.
CREATE TABLE apps (
    id         {{.ID}},
    org        TEXT NOT NULL,
    project    TEXT NOT NULL,
    domain     TEXT NOT NULL,
    name       TEXT NOT NULL,
    revision   BIGINT NOT NULL,
    version    BIGINT NOT NULL,
    spec       {{.Bytes}} NOT NULL,
    meta       {{.Bytes}} NOT NULL,
    status     {{.Bytes}} NOT NULL,
    phase      INTEGER NOT NULL DEFAULT 0,
    created_by TEXT NOT NULL DEFAULT '',
    created_at {{.Time}} NOT NULL,
    updated_at {{.Time}} NOT NULL,
    UNIQUE (org, project, domain, name)
);
