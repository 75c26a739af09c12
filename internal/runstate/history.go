package runstate

import (
	"context"

	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/loglink"
	"fmgr.dev/internal/requrl"
	"fmgr.dev/internal/store"
)

// An action's attempts as the API shows them come from two records: the
// attempt rows (the summary the executor keeps current: phase, times,
// error, outputs) and the event history (every phase each attempt entered
// and every report about it). Phase transitions, cluster events and log
// links are read from the history only, so each shows exactly once.

// attemptsOf is every attempt of key with its history, first to last.
func (s *Service) attemptsOf(ctx context.Context, key store.ActionKey) ([]*workflow.ActionAttempt, error) {
	attempts, err := s.store.Actions.Attempts(ctx, key)
	if err != nil {
		return nil, err
	}
	events, err := s.store.Actions.Events(ctx, key)
	if err != nil {
		return nil, err
	}
	byAttempt := map[int32][]store.Event{}
	for _, e := range events {
		byAttempt[e.Attempt] = append(byAttempt[e.Attempt], e)
	}
	base := requrl.BaseURL(ctx)
	out := make([]*workflow.ActionAttempt, len(attempts))
	for i := range attempts {
		out[i] = attemptOf(&attempts[i], byAttempt[attempts[i].Attempt])
		resolveLogLinks(out[i], base, LogAttempt(key, attempts[i].Attempt))
	}
	return out, nil
}

// LogAttempt identifies attempt n of key for its log links.
func LogAttempt(key store.ActionKey, n int32) loglink.Attempt {
	return loglink.Attempt{Org: key.Org, Project: key.Project, Domain: key.Domain, Run: key.RunName, Action: key.Name, Number: n}
}

// resolveLogLinks makes each stored log link of at one the reading client
// can open: links on the manager get the client's base URL (see
// loglink.Resolve).
func resolveLogLinks(at *workflow.ActionAttempt, base string, a loglink.Attempt) {
	for i, tl := range at.GetLogInfo() {
		name, uri := loglink.Resolve(base, a, tl.GetName(), tl.GetUri())
		if name != tl.GetName() || uri != tl.GetUri() {
			tl = proto.CloneOf(tl)
			tl.Name, tl.Uri = name, uri
			at.LogInfo[i] = tl
		}
	}
}

// eventInfo decodes what a reporter said with an event (empty when the
// event carries nothing, as transitions from before events did).
func eventInfo(e *store.Event) *workflow.ActionEvent {
	ae := &workflow.ActionEvent{}
	if len(e.Info) > 0 && proto.Unmarshal(e.Info, ae) != nil {
		return &workflow.ActionEvent{}
	}
	return ae
}

// attemptOf merges an attempt row with its events (in the order they
// happened): a new phase transition wherever the phase changes, every
// cluster event once, each log link once by name (the latest report).
func attemptOf(at *store.Attempt, events []store.Event) *workflow.ActionAttempt {
	out := &workflow.ActionAttempt{
		Phase:     at.Phase.Proto(),
		StartTime: ts(at.StartedAt),
		EndTime:   tsPtr(at.EndedAt),
		ErrorInfo: errorInfo(at.ErrorInfo),
		Attempt:   uint32(at.Attempt),
		Cluster:   at.Cluster,
	}
	if at.OutputURI != "" {
		out.Outputs = &task.OutputReferences{OutputUri: at.OutputURI}
	}
	// Each log link once by name, where it was first reported; a link
	// reported again (rendered once more, when the attempt ended) is the
	// later one.
	logs := map[string]int{}
	addLog := func(tl *core.TaskLog, replace bool) {
		if tl == nil {
			return
		}
		if i, ok := logs[tl.GetName()]; ok {
			if replace {
				out.LogInfo[i] = tl
			}
			return
		}
		logs[tl.GetName()] = len(out.LogInfo)
		out.LogInfo = append(out.LogInfo, tl)
	}
	var last *workflow.PhaseTransition
	for i := range events {
		e := &events[i]
		if last == nil || last.GetPhase() != e.Phase.Proto() {
			if last != nil {
				last.EndTime = ts(e.OccurredAt)
			}
			last = &workflow.PhaseTransition{Phase: e.Phase.Proto(), StartTime: ts(e.OccurredAt)}
			out.PhaseTransitions = append(out.PhaseTransitions, last)
		}
		info := eventInfo(e)
		out.ClusterEvents = append(out.ClusterEvents, info.GetClusterEvents()...)
		for _, tl := range info.GetLogInfo() {
			addLog(tl, true)
		}
		if info.GetLogContext() != nil {
			out.LogContext = info.GetLogContext()
		}
		if out.Cluster == "" {
			out.Cluster = info.GetCluster()
		}
		if cs := info.GetCacheStatus(); cs != core.CatalogCacheStatus_CACHE_DISABLED {
			out.CacheStatus = cs // the latest the attempt reported
		}
	}
	if last != nil && at.EndedAt != nil {
		last.EndTime = ts(*at.EndedAt)
	}
	// The executor records log info on the attempt when it starts the
	// attempt's process: from then on TailLogs has something to serve.
	if len(at.LogInfo) > 0 {
		out.LogsAvailable = true
		tl := &core.TaskLog{}
		if proto.Unmarshal(at.LogInfo, tl) == nil {
			addLog(tl, false)
		}
	}
	return out
}

// WatchClusterEvents streams the cluster events of one attempt of key
// (attempt 0: the current one): those recorded so far as the first message
// (maybe empty), then each batch recorded later. It ends once the attempt
// has ended and everything recorded for it was sent: a retry's new attempt
// is a new stream.
func (s *Service) WatchClusterEvents(ctx context.Context, key store.ActionKey, attempt uint32, send func([]*workflow.ClusterEvent) error) error {
	a, err := s.Get(ctx, key)
	if err != nil {
		return err
	}
	n := int32(attempt)
	if attempt == 0 {
		n = a.Attempts
	}
	if attempt > uint32(a.Attempts) {
		return errs.NotFoundf("attempt %d of action %s (it has %d)", attempt, key, a.Attempts)
	}
	sent := map[int64]bool{} // event ids, so a resync or a late event sends nothing twice
	first := true
	for {
		sub := s.hub.Subscribe(ForAction(key))
		done, err := s.sendClusterEvents(ctx, key, n, sent, &first, send)
		for err == nil && !done {
			var resync bool
			if _, resync, err = next(ctx, sub); err != nil || resync {
				break
			}
			done, err = s.sendClusterEvents(ctx, key, n, sent, &first, send)
		}
		sub.Close()
		if done || err != nil {
			return err
		}
	}
}

// sendClusterEvents sends the attempt's cluster events not sent yet (the
// first call sends even none) and reports whether the attempt has ended.
func (s *Service) sendClusterEvents(ctx context.Context, key store.ActionKey, attempt int32, sent map[int64]bool, first *bool, send func([]*workflow.ClusterEvent) error) (bool, error) {
	// The attempt's end is read before its events: an event recorded with
	// the end is then among them.
	attempts, err := s.store.Actions.Attempts(ctx, key)
	if err != nil {
		return false, err
	}
	ended := false
	for _, at := range attempts {
		if at.Attempt == attempt {
			ended = at.EndedAt != nil
		}
	}
	events, err := s.store.Actions.Events(ctx, key)
	if err != nil {
		return false, err
	}
	var batch []*workflow.ClusterEvent
	for i := range events {
		e := &events[i]
		if e.Attempt != attempt || sent[e.ID] {
			continue
		}
		sent[e.ID] = true
		batch = append(batch, eventInfo(e).GetClusterEvents()...)
	}
	if len(batch) > 0 || *first {
		*first = false
		if err := send(batch); err != nil {
			return false, err
		}
	}
	return ended, nil
}
