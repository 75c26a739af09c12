package kube

import (
	"encoding/json"
	"time"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// The TaskAction's status is a projection of the action's row: the
// database is the record of truth, written first through the attempt core,
// and the status shows kubectl users the same thing the API shows.

// project sets ta's status from a and reports whether it changed.
func project(ta *v1.TaskAction, a *store.Action, now time.Time) bool {
	before := ta.Status.DeepCopy()
	st := &ta.Status
	st.Attempts = uint32(a.Attempts)
	st.CacheStatus = a.CacheStatus
	st.ErrorState = errorState(a.ErrorInfo)

	progressing, reason := metav1.ConditionTrue, v1.ReasonQueued
	var ended string // the condition that becomes True when the action ended
	switch a.Phase {
	case phase.Queued, phase.WaitingForResources:
		if a.Attempts > 1 {
			reason = v1.ReasonRetryableFailure
		}
	case phase.Initializing:
		reason = v1.ReasonInitializing
	case phase.Running:
		reason = v1.ReasonExecuting
	case phase.Paused:
		reason = v1.ReasonPaused
	case phase.Succeeded, phase.Recovered:
		progressing, reason, ended = metav1.ConditionFalse, v1.ReasonCompleted, v1.ConditionSucceeded
	case phase.Failed:
		progressing, reason, ended = metav1.ConditionFalse, v1.ReasonPermanentFailure, v1.ConditionFailed
	case phase.TimedOut:
		progressing, reason, ended = metav1.ConditionFalse, v1.ReasonTimedOut, v1.ConditionFailed
	case phase.Aborted:
		progressing, reason, ended = metav1.ConditionFalse, v1.ReasonAborted, v1.ConditionFailed
	}
	msg := ""
	if st.ErrorState != nil && (a.Phase.Terminal() || reason == v1.ReasonRetryableFailure) {
		msg = st.ErrorState.Message
	}
	ta.SetCondition(v1.ConditionProgressing, progressing, reason, msg)
	for _, c := range []string{v1.ConditionSucceeded, v1.ConditionFailed} {
		if c == ended {
			ta.SetCondition(c, metav1.ConditionTrue, reason, msg)
		} else if ta.Condition(c) != nil || ended != "" {
			ta.SetCondition(c, metav1.ConditionFalse, reason, "")
		}
	}
	name := a.Phase.String()
	if last := len(st.PhaseHistory); last == 0 || st.PhaseHistory[last-1].Phase != name {
		ta.RecordPhase(name, msg, now)
		b, _ := json.Marshal(map[string]string{"phase": name, "actionId": a.ActionKey.String(), "timestamp": now.UTC().Format(time.RFC3339Nano)})
		st.StateJSON = string(b)
	}
	return !equality.Semantic.DeepEqual(before, st)
}

// errorState is the stored ExecutionError as the status shows it.
func errorState(raw []byte) *v1.ErrorState {
	if len(raw) == 0 {
		return nil
	}
	ee := &core.ExecutionError{}
	if proto.Unmarshal(raw, ee) != nil {
		return nil
	}
	es := &v1.ErrorState{Code: ee.GetCode(), Message: ee.GetMessage()}
	switch ee.GetKind() {
	case core.ExecutionError_USER:
		es.Kind = v1.ErrorKindUser
	case core.ExecutionError_SYSTEM:
		es.Kind = v1.ErrorKindSystem
	}
	return es
}
