-- The output cache (cache/): outputs of discoverable tasks by cache key and
-- the reservations that let one action of many identical ones compute them.
-- Keys are scoped by org, project and domain (the reference drops org).

CREATE TABLE cache_outputs (
    org        TEXT NOT NULL,
    project    TEXT NOT NULL,
    domain     TEXT NOT NULL,
    cache_key  TEXT NOT NULL,
    output_uri TEXT NOT NULL,
    -- Serialized cacheservice.Metadata (source task, key map, times).
    metadata   {{.Bytes}},
    -- The source task's name, for `flyte-manager cache purge --task`.
    task_name  TEXT NOT NULL DEFAULT '',
    created_at {{.Time}} NOT NULL,
    updated_at {{.Time}} NOT NULL,
    PRIMARY KEY (org, project, domain, cache_key)
);

-- Eviction of the oldest entries and expiry by time-to-live.
CREATE INDEX cache_outputs_updated_idx ON cache_outputs (updated_at);
-- Purge by project/domain/task; GLOBAL lookups by org and key.
CREATE INDEX cache_outputs_task_idx ON cache_outputs (org, project, domain, task_name);
CREATE INDEX cache_outputs_key_idx ON cache_outputs (org, cache_key, updated_at);

CREATE TABLE cache_reservations (
    org               TEXT NOT NULL,
    project           TEXT NOT NULL,
    domain            TEXT NOT NULL,
    cache_key         TEXT NOT NULL,
    owner_id          TEXT NOT NULL,
    heartbeat_seconds BIGINT NOT NULL,
    expires_at        {{.Time}} NOT NULL,
    created_at        {{.Time}} NOT NULL,
    updated_at        {{.Time}} NOT NULL,
    PRIMARY KEY (org, project, domain, cache_key)
);

CREATE INDEX cache_reservations_expires_idx ON cache_reservations (expires_at);
CREATE INDEX cache_reservations_owner_idx ON cache_reservations (owner_id);

-- The cache key of a discoverable task's action: the SDK's for children
-- (TaskAction.cache_key), computed the same way by the manager for roots.
ALTER TABLE actions ADD COLUMN cache_key TEXT NOT NULL DEFAULT '';
