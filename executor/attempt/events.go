package attempt

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/db"
	"fmgr.dev/internal/ident"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// Every write of the core records what happened in the action's history:
// one event per phase an attempt enters (with its reason, error, log links,
// cluster and outputs), and the cluster's own news about a running attempt
// (ReportClusterEvents) as further events of the phase it is in. The store
// records them in the same transaction as the action's new state, so the
// history and the state never disagree.

// ClusterLocal names where the local driver runs attempts: this host.
const ClusterLocal = "local"

// eventsFor describes the transitions the write for ev makes at at: the
// attempt entering its new phase to, and on a retry both the failed attempt
// and the one that replaces it.
func (c *Core) eventsFor(a *store.Action, ev machine.Event, dec machine.Decision, to phase.Phase, rec Record, at time.Time) []store.Event {
	cur := a.Attempts
	switch dec := dec.(type) {
	case *machine.Retry:
		cause := fmt.Sprintf("%s: %s", dec.Cause.Code, dec.Cause.Message)
		failed := c.event(a, cur, phase.Failed, at, cause)
		failed.Outputs = outputsOf(rec.OutDir)
		failed.ErrorInfo = errorInfoOf(dec.Cause)
		failed.CacheStatus = rec.Cache
		if rec.Logs {
			failed.LogInfo = rec.LogLinks
		}
		reason := dec.Reason
		if reason == "" {
			reason = fmt.Sprintf("attempt %d failed, retrying (%s)", cur, cause)
		}
		return []store.Event{
			c.stored(failed, cause, at),
			c.stored(c.event(a, cur+1, phase.Queued, at, reason), reason, at),
		}
	case *machine.Terminal:
		shown := dec.Reason
		if dec.Phase == phase.Succeeded {
			shown = "" // says nothing the phase does not
		}
		e := c.event(a, cur, dec.Phase, at, shown)
		e.Outputs = outputsOf(rec.OutDir)
		e.CacheStatus = rec.Cache
		if rec.Logs {
			e.LogInfo = rec.LogLinks
		}
		if dec.Error != nil {
			e.ErrorInfo = errorInfoOf(*dec.Error)
		}
		return []store.Event{c.stored(e, dec.Reason, at)}
	}
	reason := ""
	if w, ok := ev.(machine.Wait); ok {
		reason = w.Reason
	}
	e := c.event(a, cur, to, at, reason)
	e.CacheStatus = rec.Cache
	if rec.Logs {
		e.LogInfo = rec.LogLinks
	}
	return []store.Event{c.stored(e, reason, at)}
}

// event is the ActionEvent of attempt n of a entering p at at; a reason
// is also shown as a cluster event, where the SDK and the UI show why.
func (c *Core) event(a *store.Action, n int32, p phase.Phase, at time.Time, reason string) *workflow.ActionEvent {
	e := &workflow.ActionEvent{
		Id:           ident.ActionProto(a.ActionKey),
		Attempt:      uint32(n),
		Phase:        p.Proto(),
		UpdatedTime:  timestamppb.New(at),
		ReportedTime: timestamppb.New(at),
		Cluster:      c.opts.Cluster,
	}
	if reason != "" {
		e.ClusterEvents = []*workflow.ClusterEvent{{OccurredAt: timestamppb.New(at), Message: reason, Type: workflow.ClusterEvent_TYPE_NORMAL}}
	}
	return e
}

// stored is e as the store records it; the store numbers its version.
func (c *Core) stored(e *workflow.ActionEvent, reason string, at time.Time) store.Event {
	info, _ := proto.Marshal(e)
	return store.Event{Attempt: int32(e.GetAttempt()), Phase: phase.FromProto(e.GetPhase()), Version: store.NextVersion,
		OccurredAt: at, Reason: reason, Info: info}
}

func outputsOf(dir string) *task.OutputReferences {
	if dir == "" {
		return nil
	}
	return &task.OutputReferences{OutputUri: dir}
}

func errorInfoOf(e machine.Error) *workflow.ErrorInfo {
	return &workflow.ErrorInfo{Code: e.Code, Message: e.Message, Kind: workflow.ErrorInfo_Kind(e.Kind)}
}

// ReportClusterEvents records what the cluster reported about a's current
// attempt (Kubernetes Events of its Pod) as one further event of the phase
// it is in: history only, the action's phase does not change. It returns
// the action as written.
func (c *Core) ReportClusterEvents(ctx context.Context, a *store.Action, news []*workflow.ClusterEvent) (*store.Action, error) {
	if len(news) == 0 {
		return a, nil
	}
	fence := c.opts.Fence()
	if fence == 0 {
		return nil, ErrNotWriter
	}
	at := db.Now()
	e := c.event(a, a.Attempts, a.Phase, at, "")
	e.ClusterEvents = news
	reason := news[len(news)-1].GetReason()
	u := store.Update{Fence: fence, At: at, Events: []store.Event{c.stored(e, reason, at)}}
	updated, err := c.state.UpdateFrom(ctx, a, u)
	if err != nil {
		return nil, err
	}
	return updated, nil
}
