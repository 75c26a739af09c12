-- API keys (apikey/, `flyte-manager apikey create`). key_id is the public
-- part of a key (its client id); secret_hash is SHA-256 of the secret
-- part, which is never stored. role is viewer, contributor or admin on
-- project and domain ("*" for any). A revoked key keeps its row
-- (revoked_at set) so listings show it and tokens minted from it stop at
-- once.
CREATE TABLE api_keys (
    id          {{.ID}},
    key_id      TEXT NOT NULL UNIQUE,
    name        TEXT NOT NULL,
    secret_hash TEXT NOT NULL,
    role        TEXT NOT NULL,
    project     TEXT NOT NULL,
    domain      TEXT NOT NULL,
    created_at  {{.Time}} NOT NULL,
    revoked_at  {{.Time}}
);
