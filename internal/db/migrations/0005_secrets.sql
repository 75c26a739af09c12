-- Secrets of the Secret service, encrypted at rest (see secret/keyring.go).
-- A scope is (org, domain, project): all empty parts but org is org-wide,
-- a domain alone is domain-wide, both is one project's domain. value is
-- nonce || AES-256-GCM ciphertext under the key named key_id, sealed with
-- the scope and name as additional data, so a value cannot be moved to
-- another secret. The plaintext is never stored.
CREATE TABLE secrets (
    id         {{.ID}},
    org        TEXT NOT NULL,
    domain     TEXT NOT NULL,
    project    TEXT NOT NULL,
    name       TEXT NOT NULL,
    type       INTEGER NOT NULL DEFAULT 0,
    key_id     TEXT NOT NULL,
    value      {{.Bytes}} NOT NULL,
    created_at {{.Time}} NOT NULL,
    updated_at {{.Time}} NOT NULL,
    UNIQUE (org, domain, project, name)
);

-- Key rotation finds the values still sealed under an old key.
CREATE INDEX secrets_key_id ON secrets (key_id);
