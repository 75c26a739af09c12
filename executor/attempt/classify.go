package attempt

import (
	"context"
	"errors"
	"path/filepath"

	"fmgr.dev/executor/contract"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/runlayout"
)

// Classify reads what an attempt left under outDir (a local directory or a
// blob prefix) and classifies its end with the contract.
func (c *Core) Classify(ctx context.Context, spec *task.TaskSpec, outDir string, exit contract.Exit) (contract.Result, error) {
	f := contract.Files{OutputNames: contract.OutputNames(spec.GetTaskTemplate().GetInterface()),
		Raw: spec.GetTaskTemplate().GetType() == contract.RawContainer}
	var err error
	if filepath.IsAbs(outDir) {
		if f, err = f.ReadDir(outDir); err != nil {
			return contract.Result{}, err
		}
		return contract.ClassifyFiles(exit, f), nil
	}
	blobs := c.state.Blobs()
	prefix, err := blobs.Key(outDir)
	if err != nil {
		return contract.Result{}, err
	}
	if f.ErrorDoc, err = getIfExists(ctx, blobs, prefix+"/"+runlayout.ErrorFile); err != nil {
		return contract.Result{}, err
	}
	if f.Outputs, err = getIfExists(ctx, blobs, prefix+"/"+runlayout.OutputsFile); err != nil {
		return contract.Result{}, err
	}
	return contract.ClassifyFiles(exit, f), nil
}

// getIfExists reads a blob: nil when it does not exist, never nil when it
// does.
func getIfExists(ctx context.Context, blobs *blob.Store, key string) ([]byte, error) {
	b, err := blobs.Get(ctx, key)
	switch {
	case errors.Is(err, errs.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case b == nil:
		b = []byte{}
	}
	return b, nil
}
