-- Condition actions (flyte.new_condition): an action of type CONDITION
-- waits in PAUSED for a typed value. condition_spec is the ConditionAction
-- its parent enqueued (name, type, prompt, timeout); signal_info is the
-- SignalInfo (the value and who sent it) once it was signalled, or copied
-- from the source run when a recovering run re-uses the value. Both are NULL
-- for every other action.
ALTER TABLE actions ADD COLUMN condition_spec {{.Bytes}};
ALTER TABLE actions ADD COLUMN signal_info {{.Bytes}};
