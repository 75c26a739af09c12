-- The local executor's lease: the one manager whose executor may start and
-- record attempts. Others keep their executor on standby until the lease is
-- free or its holder stopped renewing it. token is the fencing token: it
-- grows at every takeover, and every executor write commits only while the
-- row still carries the writer's token (see internal/store/lease.go).
CREATE TABLE executor_leases (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL DEFAULT '',
    token      BIGINT NOT NULL DEFAULT 0,
    renewals   BIGINT NOT NULL DEFAULT 0,
    host       TEXT NOT NULL DEFAULT '',
    work_dir   TEXT NOT NULL DEFAULT '',
    renewed_at {{.Time}},
    expires_at {{.Time}}
);

INSERT INTO executor_leases (name) VALUES ('local');

-- The lease token of the executor that started each attempt (0: before leases).
ALTER TABLE action_attempts ADD COLUMN owner_token BIGINT NOT NULL DEFAULT 0;
