package contract

import (
	"time"

	"fmgr.dev/internal/runlayout"
)

// ValuesFor lays out the template values of one attempt: outputs in the
// attempt's directory, raw data under rawPrefix (the run's raw-data prefix;
// "" puts it under `raw` in the attempt's directory), checkpoints under
// `_flytecheckpoints` in it, the previous attempt's checkpoints as
// prev-checkpoint.
func ValuesFor(inputURI, runBase, rawPrefix, runName, action string, attempt uint32, runStart time.Time) Values {
	out := runlayout.AttemptDir(runBase, action, attempt)
	if rawPrefix == "" {
		rawPrefix = runlayout.JoinURI(out, "raw")
	}
	v := Values{
		InputURI:               inputURI,
		OutputPrefix:           out,
		RawOutputDataPrefix:    rawPrefix,
		CheckpointOutputPrefix: runlayout.JoinURI(out, runlayout.CheckpointsDir),
		RunName:                runName,
		ActionName:             action,
		RunStartTime:           runStart,
	}
	if attempt > 1 {
		v.PrevCheckpointPrefix = runlayout.JoinURI(runlayout.AttemptDir(runBase, action, attempt-1), runlayout.CheckpointsDir)
	}
	return v
}
