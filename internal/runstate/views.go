package runstate

import (
	"context"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/ident"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// The proto views of stored actions. Errors are stored as a serialized
// core.ExecutionError (the richest form: ActionUpdate needs it whole) and
// abort reasons as a serialized workflow.AbortInfo.

func ts(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }

func tsPtr(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}

func metadataOf(a *store.Action) *workflow.ActionMetadata {
	md := &workflow.ActionMetadata{
		Group:           a.Group,
		ActionType:      workflow.ActionType(a.ActionType),
		EnvironmentName: a.EnvironmentName,
		FuntionName:     a.ShortName,
		Relation:        relationOf(a),
		RecoveredFrom:   recoveredFrom(a),
	}
	if a.ParentName != nil {
		md.Parent = *a.ParentName
	}
	if a.CreatedBy != "" {
		// Who created it (the console's "Owned By"): the subject only, as
		// the manager knows no names; a UI shows the subject then.
		md.ExecutedBy = &common.EnrichedIdentity{Principal: &common.EnrichedIdentity_User{
			User: &common.User{Id: &common.UserIdentifier{Subject: a.CreatedBy}},
		}}
	}
	switch a.ActionType {
	case store.ActionTypeTrace:
		md.Spec = &workflow.ActionMetadata_Trace{Trace: &workflow.TraceActionMetadata{Name: a.ShortName}}
	case store.ActionTypeCondition:
		md.Spec = &workflow.ActionMetadata_Condition{Condition: &workflow.ConditionActionMetadata{
			Name: a.ShortName, Type: ConditionOf(a).GetType(),
		}}
	default:
		md.Spec = &workflow.ActionMetadata_Task{Task: &workflow.TaskActionMetadata{
			Id:        ident.TaskProto(a.Task),
			TaskType:  a.TaskType,
			ShortName: a.ShortName,
		}}
	}
	return md
}

func statusOf(a *store.Action) *workflow.ActionStatus {
	st := &workflow.ActionStatus{
		Phase:       a.Phase.Proto(),
		StartTime:   ts(a.CreatedAt),
		EndTime:     tsPtr(a.EndedAt),
		Attempts:    uint32(a.Attempts),
		CacheStatus: core.CatalogCacheStatus(a.CacheStatus),
	}
	if a.EndedAt != nil {
		ms := uint64(a.EndedAt.Sub(a.CreatedAt).Milliseconds())
		st.DurationMs = &ms
	}
	return st
}

// ActionOf is the summary view used by lists and CreateRun.
func ActionOf(a *store.Action) *workflow.Action {
	return &workflow.Action{Id: ident.ActionProto(a.ActionKey), Metadata: metadataOf(a), Status: statusOf(a)}
}

// executionError decodes a stored error; nil when there is none.
func executionError(b []byte) *core.ExecutionError {
	if len(b) == 0 {
		return nil
	}
	e := &core.ExecutionError{}
	if proto.Unmarshal(b, e) != nil {
		return &core.ExecutionError{Message: "unreadable error record", Kind: core.ExecutionError_SYSTEM}
	}
	return e
}

func errorInfo(b []byte) *workflow.ErrorInfo {
	e := executionError(b)
	if e == nil {
		return nil
	}
	msg := e.GetMessage()
	if e.GetCode() != "" && msg != "" {
		msg = e.GetCode() + ": " + msg
	}
	return &workflow.ErrorInfo{Message: msg, Kind: workflow.ErrorInfo_Kind(e.GetKind())}
}

func abortInfo(b []byte) *workflow.AbortInfo {
	if len(b) == 0 {
		return nil
	}
	ai := &workflow.AbortInfo{}
	if proto.Unmarshal(b, ai) != nil {
		return &workflow.AbortInfo{Reason: "aborted"}
	}
	return ai
}

// Details builds the full ActionDetails: summary, result, TaskSpec (the SDK
// rebuilds outputs from its interface) and every attempt with its history
// (history.go).
func (s *Service) Details(ctx context.Context, a *store.Action) (*workflow.ActionDetails, error) {
	d := &workflow.ActionDetails{Id: ident.ActionProto(a.ActionKey), Metadata: metadataOf(a), Status: statusOf(a)}
	if a.Phase == phase.Aborted {
		if ai := abortInfo(a.AbortInfo); ai != nil {
			d.Result = &workflow.ActionDetails_AbortInfo{AbortInfo: ai}
		}
	} else if ei := errorInfo(a.ErrorInfo); ei != nil && a.Phase.Terminal() {
		d.Result = &workflow.ActionDetails_ErrorInfo{ErrorInfo: ei}
	} else if si := signalOf(a); si != nil {
		d.Result = &workflow.ActionDetails_SignalInfo{SignalInfo: si}
	}
	if c := ConditionOf(a); c != nil {
		d.Spec = &workflow.ActionDetails_Condition{Condition: c}
	}
	if a.SpecDigest != "" {
		spec, err := s.spec(ctx, a.SpecDigest)
		if err != nil {
			return nil, err
		}
		d.Spec = &workflow.ActionDetails_Task{Task: spec}
	}
	attempts, err := s.attemptsOf(ctx, a.ActionKey)
	if err != nil {
		return nil, err
	}
	d.Attempts = attempts
	return d, nil
}

// UpdateOf is what WatchForUpdates/StateService.Watch send for a child: its
// phase, and when terminal the output directory and, for failures, the
// error; for a signalled condition its value, inline (a condition has no
// outputs file).
func UpdateOf(a *store.Action, outputURI string) *workflow.ActionUpdate {
	u := &workflow.ActionUpdate{ActionId: ident.ActionProto(a.ActionKey), Phase: a.Phase.Proto()}
	if a.Phase.Terminal() {
		u.OutputUri = outputURI
		if a.Phase == phase.Failed || a.Phase == phase.TimedOut {
			u.Error = executionError(a.ErrorInfo)
		}
		if si := signalOf(a); si != nil {
			u.Value = si.GetOutput()
		}
	}
	return u
}
