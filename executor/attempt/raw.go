package attempt

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"fmgr.dev/executor/copilot"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/errs"
)

// planRaw completes the launch of a raw container (copilot.IsRaw): it reads
// the attempt's inputs, lays out the data contract and fills the
// `{{.inputs.<name>}}` templates of the argv. A template the inputs cannot
// fill or unusable data directories are the task's fault (bad != "");
// the error is for storage failures.
func (c *Core) planRaw(ctx context.Context, l *Launch, inputsFile string) (bad string, err error) {
	blobs := c.state.Blobs()
	key, err := blobs.Key(inputsFile)
	if err != nil {
		return "", err
	}
	inputs := &task.Inputs{}
	b, err := blobs.Get(ctx, key)
	switch {
	case errors.Is(err, errs.ErrNotFound):
		// A task without inputs may have no inputs file.
	case err != nil:
		return "", err
	default:
		if err := proto.Unmarshal(b, inputs); err != nil {
			return fmt.Sprintf("the inputs at %s are unreadable: %v", inputsFile, err), nil
		}
	}
	job, err := copilot.NewJob(l.Spec.GetTaskTemplate(), inputs)
	if err != nil {
		return "raw container: " + err.Error(), nil
	}
	if l.Args, err = job.Render(l.Args); err != nil {
		return "raw container: " + err.Error(), nil
	}
	job.InputsURI = inputsFile
	l.Raw = job
	return "", nil
}
