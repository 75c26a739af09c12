-- ListRuns(paused_actions_only): the runs that have an action waiting in
-- PAUSED (9, a condition waiting for its signal) are found by probing this
-- index once per run root. Few actions are ever paused at once, so it stays
-- small however many actions there are.
CREATE INDEX actions_paused_idx ON actions (org, project, domain, run_name) WHERE phase = 9;
