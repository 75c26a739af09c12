package copilot

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"

	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/errs"
)

// The contract in a Pod: the driver hands the `flyte-manager copilot`
// commands of its init container and sidecar the job as one argument
// (Encode), and they rebuild it (Decode) with the attempt's inputs read
// from storage, so the Pod and the local executor run the same Download
// and Collect.

// Encode is the job without its inputs, as a single command-line argument:
// the part of the task template the contract reads (data directories,
// formats, interface), base64 protobuf.
func (j *Job) Encode() (string, error) {
	t := &core.TaskTemplate{Interface: j.Interface, Target: &core.TaskTemplate_Container{Container: &core.Container{
		Image: j.Image,
		DataConfig: &core.DataLoadingConfig{Enabled: true, InputPath: j.InputDir, OutputPath: j.OutputDir,
			Format: j.Format, FileInputLayout: j.Layout},
	}}}
	b, err := proto.Marshal(t)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// Decode rebuilds a job from Encode's argument and the attempt's inputs.
func Decode(arg string, inputs *task.Inputs) (*Job, error) {
	b, err := base64.StdEncoding.DecodeString(arg)
	if err != nil {
		return nil, fmt.Errorf("the job argument is not base64: %w", err)
	}
	t := &core.TaskTemplate{}
	if err := proto.Unmarshal(b, t); err != nil {
		return nil, fmt.Errorf("the job argument is not a task template: %w", err)
	}
	if !IsRaw(t) {
		return nil, errors.New("the job argument is not a raw container's contract")
	}
	return NewJob(t, inputs)
}

// ReadInputs reads an attempt's inputs file; a task without inputs may
// have none.
func ReadInputs(ctx context.Context, blobs *blob.Store, uri string) (*task.Inputs, error) {
	inputs := &task.Inputs{}
	if uri == "" {
		return inputs, nil
	}
	key, err := blobs.Key(uri)
	if err != nil {
		return nil, err
	}
	b, err := blobs.Get(ctx, key)
	switch {
	case errors.Is(err, errs.ErrNotFound) || errors.Is(err, fs.ErrNotExist):
		return inputs, nil
	case err != nil:
		return nil, err
	}
	if err := proto.Unmarshal(b, inputs); err != nil {
		return nil, fmt.Errorf("the inputs at %s are unreadable: %w", uri, err)
	}
	return inputs, nil
}
