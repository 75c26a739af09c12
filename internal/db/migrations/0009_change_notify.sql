-- Cross-replica fan-out: on PostgreSQL every statement that appends
-- change_log rows notifies channel fmgr_changes (store.ChangesChannel) with
-- the highest resource version it appended. Notifications are delivered at
-- commit, so a replica's hub that LISTENs reads the change log as soon as
-- another replica's write is visible, instead of at its next poll. SQLite
-- has one writing process, whose hub is woken directly: nothing to do.
{{if .Postgres}}
CREATE FUNCTION change_log_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_notify('fmgr_changes', coalesce((SELECT max(resource_version) FROM added)::text, '')); RETURN NULL; END
$$;

CREATE TRIGGER change_log_notify AFTER INSERT ON change_log REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION change_log_notify();
{{end}}
