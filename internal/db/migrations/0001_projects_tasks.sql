-- Domains, projects, content-addressed task specs and deployed tasks.
-- Placeholders: {{.ID}} surrogate key, {{.Bytes}} binary, {{.Time}} timestamp,
-- {{.Now}} a timestamp literal of the moment the migration runs.

CREATE TABLE domains (
    id       TEXT PRIMARY KEY,
    name     TEXT NOT NULL,
    position INTEGER NOT NULL
);

INSERT INTO domains (id, name, position) VALUES
    ('development', 'development', 1),
    ('staging', 'staging', 2),
    ('production', 'production', 3);

CREATE TABLE projects (
    id           {{.ID}},
    org          TEXT NOT NULL DEFAULT '',
    name         TEXT NOT NULL,
    display_name TEXT NOT NULL DEFAULT '',
    description  TEXT NOT NULL DEFAULT '',
    labels       TEXT,
    state        INTEGER NOT NULL DEFAULT 0,
    created_at   {{.Time}} NOT NULL,
    updated_at   {{.Time}} NOT NULL,
    CONSTRAINT projects_identity_key UNIQUE (org, name)
);

INSERT INTO projects (org, name, display_name, description, state, created_at, updated_at)
    VALUES ('', 'flytesnacks', 'flytesnacks', 'Default project', 0, {{.Now}}, {{.Now}});

-- Stored once per sha256 of the spec's deterministic bytes.
CREATE TABLE task_specs (
    digest     TEXT PRIMARY KEY,
    spec       {{.Bytes}} NOT NULL,
    created_at {{.Time}} NOT NULL
);

CREATE TABLE tasks (
    id               {{.ID}},
    org              TEXT NOT NULL,
    project          TEXT NOT NULL,
    domain           TEXT NOT NULL,
    name             TEXT NOT NULL,
    version          TEXT NOT NULL,
    spec_digest      TEXT NOT NULL REFERENCES task_specs (digest),
    short_name       TEXT NOT NULL DEFAULT '',
    environment_name TEXT NOT NULL DEFAULT '',
    deployed_by      TEXT NOT NULL DEFAULT '',
    created_at       {{.Time}} NOT NULL,
    CONSTRAINT tasks_identity_key UNIQUE (org, project, domain, name, version)
);

-- ListTasks of a project, newest first; ListVersions / latest version of a name.
CREATE INDEX tasks_project_idx ON tasks (org, project, domain, created_at, id);
CREATE INDEX tasks_name_idx ON tasks (org, project, domain, name, created_at, id);
