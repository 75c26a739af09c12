-- When the periodic retention collector first ran on this database
-- (internal/retention): it deletes nothing until retention.notice has
-- passed since then, so that upgrading to a manager with a default
-- retention warns before the first old run goes. One row.
CREATE TABLE retention_notice (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    started_at {{.Time}} NOT NULL
);
