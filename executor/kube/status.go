package kube

import (
	"encoding/json"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	v1 "fmgr.dev/executor/api/v1"
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
	st.ErrorState = v1.ErrorStateOf(a.ErrorInfo)

	msg := ta.SetProgress(a.Phase, a.Attempts)
	name := a.Phase.String()
	if last := len(st.PhaseHistory); last == 0 || st.PhaseHistory[last-1].Phase != name {
		ta.RecordPhase(name, msg, now)
		b, _ := json.Marshal(map[string]string{"phase": name, "actionId": a.ActionKey.String(), "timestamp": now.UTC().Format(time.RFC3339Nano)})
		st.StateJSON = string(b)
	}
	return !equality.Semantic.DeepEqual(before, st)
}
