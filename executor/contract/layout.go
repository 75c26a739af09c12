package contract

import (
	"strconv"
	"time"
)

// AttemptDir is the output directory of one attempt:
// `<runBase>/<action>/<attempt>`. The SDK's fallback for a FAILED child
// without an error in the update reads `<runBase>/<action>/1/error.pb`, so
// the layout must not add anything (like the reference's shard) in between.
func AttemptDir(runBase, action string, attempt uint32) string {
	return JoinURI(runBase, action, strconv.FormatUint(uint64(attempt), 10))
}

// ValuesFor lays out the template values of one attempt: outputs in the
// attempt's directory, raw data under rawPrefix (the run's raw-data prefix;
// "" puts it under `raw` in the attempt's directory), checkpoints under
// `_flytecheckpoints` in it, the previous attempt's checkpoints as
// prev-checkpoint.
func ValuesFor(inputURI, runBase, rawPrefix, runName, action string, attempt uint32, runStart time.Time) Values {
	out := AttemptDir(runBase, action, attempt)
	if rawPrefix == "" {
		rawPrefix = JoinURI(out, "raw")
	}
	v := Values{
		InputURI:               inputURI,
		OutputPrefix:           out,
		RawOutputDataPrefix:    rawPrefix,
		CheckpointOutputPrefix: JoinURI(out, CheckpointsDir),
		RunName:                runName,
		ActionName:             action,
		RunStartTime:           runStart,
	}
	if attempt > 1 {
		v.PrevCheckpointPrefix = JoinURI(AttemptDir(runBase, action, attempt-1), CheckpointsDir)
	}
	return v
}
