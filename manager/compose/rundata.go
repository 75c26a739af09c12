package compose

import (
	"context"
	"math"

	"fmgr.dev/dataproxy"
	"fmgr.dev/gen/go/flyteidl2/common"
	dataproxypb "fmgr.dev/gen/go/flyteidl2/dataproxy"
	"fmgr.dev/gen/go/flyteidl2/logs/dataplane"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/ident"
	"fmgr.dev/internal/logship"
	"fmgr.dev/internal/runlayout"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/store"
)

// logSource is the executor side of TailLogs.
type logSource interface {
	Logs(ctx context.Context, key store.ActionKey, attempt int32, follow bool, emit func([]*dataplane.LogLine) error) error
}

// runData gives the DataProxy service what it needs of runs: inputs and
// outputs from the run state, logs from the executor.
type runData struct {
	state *runstate.Service
	logs  logSource
}

var _ dataproxy.RunData = runData{}

func (r runData) WriteInputs(ctx context.Context, req *dataproxypb.UploadInputsRequest) (*common.OffloadedInputData, error) {
	return r.state.WriteInputs(ctx, req)
}

func (r runData) ActionData(ctx context.Context, id *common.ActionIdentifier) (dataproxy.ActionData, error) {
	d, err := r.state.Data(ctx, id)
	if err != nil {
		return dataproxy.ActionData{}, err
	}
	return dataproxy.ActionData{Inputs: d.Inputs, Outputs: d.Outputs, InputsURI: d.InputsURI, OutputsURI: d.OutputsURI}, nil
}

func (r runData) ReportURI(ctx context.Context, id *common.ActionAttemptIdentifier) (string, error) {
	return r.state.ReportURI(ctx, id)
}

// Logs serves one attempt's log (the latest when attempt is 0), following
// it while the attempt runs.
func (r runData) Logs(ctx context.Context, req *dataproxypb.TailLogsRequest, send func(*dataproxypb.TailLogsResponse) error) error {
	key, err := ident.Action("action_id", req.GetActionId())
	if err != nil {
		return err
	}
	a, err := r.state.Get(ctx, key)
	if err != nil {
		return err
	}
	if req.GetAttempt() > math.MaxInt32 {
		// int32 would wrap it to a negative number, which means "the latest".
		return errs.Invalidf("attempt %d is out of range", req.GetAttempt())
	}
	attempt := int32(req.GetAttempt())
	if attempt == 0 {
		attempt = a.Attempts
	}
	emit := func(lines []*dataplane.LogLine) error {
		return send(&dataproxypb.TailLogsResponse{Logs: []*dataproxypb.TailLogsResponse_Logs{{Lines: lines}}})
	}
	live := func(emit func([]*dataplane.LogLine) error) error {
		return r.logs.Logs(ctx, key, attempt, true, emit)
	}
	// The executor ships every attempt's log to storage beside its outputs
	// (package logship); a run whose base lies outside storage has only
	// the live source.
	var (
		blobs *blob.Store
		dir   string
	)
	if b := r.state.Blobs(); b != nil {
		if k, err := b.Key(runlayout.AttemptLogDir(a.RunOutputBase, a.Name, uint32(attempt))); err == nil {
			blobs, dir = b, k
		}
	}
	// Whether the attempt runs: as read above first, then read again by
	// a follower of the stored log.
	cur := a
	running := func(ctx context.Context) bool {
		if cur == nil {
			if cur, err = r.state.Get(ctx, key); err != nil {
				return false
			}
		}
		ok := attempt == cur.Attempts && !cur.Phase.Terminal()
		cur = nil
		return ok
	}
	return logship.Serve(ctx, blobs, dir, running, live, emit)
}

func (r runData) CodeBundleURI(ctx context.Context, attempt *common.ActionAttemptIdentifier, id *task.TaskIdentifier) (string, error) {
	return r.state.CodeBundleURI(ctx, attempt, id)
}
