package v1

import (
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/internal/phase"
)

// The status of a TaskAction is a projection of its action's row in the
// database, the record of truth. The kubernetes executor writes it onto the
// objects in the cluster; the manager's Kubernetes-style API computes it
// for every action it serves. Both go through these functions, so the
// conditions read the same wherever the object comes from.

// Progress is the Progressing condition an action in phase p (at attempt
// attempts, 1-based) shows: its status and reason, and which of Succeeded
// and Failed has become True ("" while it runs).
func Progress(p phase.Phase, attempts int32) (progressing metav1.ConditionStatus, reason, ended string) {
	progressing, reason = metav1.ConditionTrue, ReasonQueued
	switch p {
	case phase.Queued, phase.WaitingForResources:
		if attempts > 1 {
			reason = ReasonRetryableFailure
		}
	case phase.Initializing:
		reason = ReasonInitializing
	case phase.Running:
		reason = ReasonExecuting
	case phase.Paused:
		reason = ReasonPaused
	case phase.Succeeded, phase.Recovered:
		progressing, reason, ended = metav1.ConditionFalse, ReasonCompleted, ConditionSucceeded
	case phase.Failed:
		progressing, reason, ended = metav1.ConditionFalse, ReasonPermanentFailure, ConditionFailed
	case phase.TimedOut:
		progressing, reason, ended = metav1.ConditionFalse, ReasonTimedOut, ConditionFailed
	case phase.Aborted:
		progressing, reason, ended = metav1.ConditionFalse, ReasonAborted, ConditionFailed
	}
	return progressing, reason, ended
}

// SetProgress sets the conditions of an action in phase p at attempt
// attempts whose last failure is Status.ErrorState, and returns the message
// they carry (the failure's, once it ended or is being retried).
func (t *TaskAction) SetProgress(p phase.Phase, attempts int32) string {
	progressing, reason, ended := Progress(p, attempts)
	msg := ""
	if es := t.Status.ErrorState; es != nil && (p.Terminal() || reason == ReasonRetryableFailure) {
		msg = es.Message
	}
	t.SetCondition(ConditionProgressing, progressing, reason, msg)
	for _, c := range []string{ConditionSucceeded, ConditionFailed} {
		if c == ended {
			t.SetCondition(c, metav1.ConditionTrue, reason, msg)
		} else if t.Condition(c) != nil || ended != "" {
			t.SetCondition(c, metav1.ConditionFalse, reason, "")
		}
	}
	return msg
}

// ErrorStateOf is a stored flyteidl2.core.ExecutionError as the status shows
// it; nil for none (or one that does not parse).
func ErrorStateOf(raw []byte) *ErrorState {
	if len(raw) == 0 {
		return nil
	}
	ee := &core.ExecutionError{}
	if proto.Unmarshal(raw, ee) != nil {
		return nil
	}
	es := &ErrorState{Code: ee.GetCode(), Message: ee.GetMessage()}
	switch ee.GetKind() {
	case core.ExecutionError_USER:
		es.Kind = ErrorKindUser
	case core.ExecutionError_SYSTEM:
		es.Kind = ErrorKindSystem
	}
	return es
}
