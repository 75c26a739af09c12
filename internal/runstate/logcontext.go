package runstate

import (
	"context"
	"math"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/ident"
	"fmgr.dev/internal/store"
)

// LogContexter is an executor that can say where an attempt's logs are:
// its Pod and containers on Kubernetes, its directory for the local one.
type LogContexter interface {
	LogContext(key store.ActionKey, attempt int32) (*core.LogContext, error)
}

// AttemptLogContext answers GetActionLogContext for one attempt of id
// (attempt 0: the current one, as TailLogs): where its logs are, the
// cluster it ran on and when it started and ended. A log context an
// executor or reporter recorded in the attempt's history wins over the
// one the executor derives; the containers' process times are the
// attempt's where nobody reported them.
func (s *Service) AttemptLogContext(ctx context.Context, id *common.ActionIdentifier, attempt uint32) (*workflow.GetActionLogContextResponse, error) {
	key, err := ident.Action("action_id", id)
	if err != nil {
		return nil, err
	}
	if attempt > math.MaxInt32 {
		return nil, errs.Invalidf("attempt %d is out of range", attempt)
	}
	a, err := s.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	n := int32(attempt)
	if n == 0 {
		n = a.Attempts
	}
	attempts, err := s.attemptsOf(ctx, key)
	if err != nil {
		return nil, err
	}
	var at *workflow.ActionAttempt
	for _, x := range attempts {
		if int32(x.GetAttempt()) == n {
			at = x
		}
	}
	if at == nil {
		return nil, errs.NotFoundf("attempt %d of action %s (it has %d)", n, key, a.Attempts)
	}
	lc := at.GetLogContext()
	if lc == nil {
		if lx, ok := s.exec.(LogContexter); ok {
			if lc, err = lx.LogContext(key, n); err != nil {
				return nil, err
			}
		}
	}
	for _, pod := range lc.GetPods() {
		for _, c := range pod.GetContainers() {
			if c.Process == nil {
				c.Process = &core.ContainerContext_ProcessContext{ContainerStartTime: at.GetStartTime(), ContainerEndTime: at.GetEndTime()}
			}
		}
	}
	return &workflow.GetActionLogContextResponse{
		LogContext: lc,
		Cluster:    at.GetCluster(),
		StartTime:  at.GetStartTime(),
		EndTime:    at.GetEndTime(),
	}, nil
}
