-- Run recovery (RunSpec.relation RECOVER): an action of the new run that
-- took its outputs from the source run instead of running records which run
-- that was. The source action has the same name (names are deterministic),
-- so the run name is all ActionMetadata.recovered_from needs.
ALTER TABLE actions ADD COLUMN recovered_from TEXT NOT NULL DEFAULT '';
