// Package events serves flyteidl2.workflow.EventsProxyService: executors
// report what happened to the attempts of their actions (every phase an
// attempt entered, the cluster's news about it) and Record adds it to the
// actions' one history, the same history the manager's own executors write
// through the attempt core. ActionDetails, WatchActionDetails and
// WatchClusterEvents are served from it.
//
// Recording is idempotent on (action, attempt, phase, version), as in the
// reference: a reporter that is unsure an event arrived sends it again and
// nothing is recorded twice. The action's phase is not changed by an event:
// it stays its executor's to write (one writer), so a report can add history
// but never contradict the state: a new event must be about the phase its
// attempt is in, and an attempt that ended takes none (FAILED_PRECONDITION).
// The configured bounds (config.Events) keep every history small, since
// every details answer and watcher snapshot carries all of it.
package events

import (
	"context"
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/gen/go/flyteidl2/workflow/workflowconnect"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/ident"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/server"
	"fmgr.dev/internal/store"
)

// MaxEventsPerRecord bounds one Record call; reporters batch below it.
const MaxEventsPerRecord = 5000

// maxReason bounds the short reason kept beside each event.
const maxReason = 256

// Service records reported events into the run state's history.
type Service struct {
	state  *runstate.Service
	limits config.Events
}

var _ workflowconnect.EventsProxyServiceHandler = (*Service)(nil)

// Setup mounts EventsProxyService over state on srv, bounded by limits.
func Setup(srv *server.Server, state *runstate.Service, limits config.Events) error {
	s := &Service{state: state, limits: limits}
	return srv.Mount(server.NewService(workflowconnect.NewEventsProxyServiceHandler(s, srv.HandlerOptions()...)))
}

// Record validates every event first, then records them all in one
// transaction: a request with one bad event records nothing.
func (s *Service) Record(ctx context.Context, req *connect.Request[workflow.RecordRequest]) (*connect.Response[workflow.RecordResponse], error) {
	evs := req.Msg.GetEvents()
	if len(evs) == 0 {
		return nil, errs.Invalidf("events: at least one event is required")
	}
	if len(evs) > MaxEventsPerRecord {
		return nil, errs.Invalidf("events: %d events in one request, at most %d", len(evs), MaxEventsPerRecord)
	}
	var reports []runstate.Reported // by first appearance, so each action's events keep their order
	index := map[store.ActionKey]int{}
	for i, e := range evs {
		key, ev, err := s.eventOf(fmt.Sprintf("events[%d]", i), e)
		if err != nil {
			return nil, err
		}
		at, seen := index[key]
		if !seen {
			at = len(reports)
			index[key] = at
			reports = append(reports, runstate.Reported{Key: key})
		}
		reports[at].Events = append(reports[at].Events, ev)
	}
	lim := store.ReportLimits{MaxPerAttempt: s.limits.MaxPerAttempt, MaxAttemptBytes: int64(s.limits.MaxAttemptBytes)}
	if err := s.state.RecordEvents(ctx, reports, lim); err != nil {
		return nil, err
	}
	return connect.NewResponse(&workflow.RecordResponse{}), nil
}

// eventOf checks one reported event and converts it for the store.
func (s *Service) eventOf(field string, e *workflow.ActionEvent) (store.ActionKey, store.Event, error) {
	key, err := ident.Action(field+".id", e.GetId())
	if err != nil {
		return key, store.Event{}, err
	}
	if e.GetAttempt() < 1 || e.GetAttempt() > 1<<30 {
		return key, store.Event{}, errs.Invalidf("%s.attempt: attempts are numbered from 1, got %d", field, e.GetAttempt())
	}
	// A version numbers the reports of one phase of one attempt, which
	// holds at most MaxPerAttempt events.
	if e.GetVersion() >= uint32(s.limits.MaxPerAttempt) {
		return key, store.Event{}, errs.Invalidf("%s.version: %d is out of range (below %d, events.maxPerAttempt)", field, e.GetVersion(), s.limits.MaxPerAttempt)
	}
	p := phase.FromProto(e.GetPhase())
	if p == phase.Unspecified {
		return key, store.Event{}, errs.Invalidf("%s.phase is required", field)
	}
	if _, known := common.ActionPhase_name[int32(p)]; !known {
		return key, store.Event{}, errs.Invalidf("%s.phase: %d is not an action phase", field, p)
	}
	// The reporter's time stays in the event's details; the history orders
	// the event by when it is recorded (the store's), so a reporter's clock
	// cannot move it before the phase it is about.
	if t := e.GetUpdatedTime(); t != nil {
		if err := t.CheckValid(); err != nil {
			return key, store.Event{}, errs.Invalidf("%s.updated_time: %v", field, err)
		}
	}
	info, err := proto.MarshalOptions{Deterministic: true}.Marshal(e)
	if err != nil {
		return key, store.Event{}, errs.Invalidf("%s: unreadable event", field)
	}
	if len(info) > s.limits.MaxEventBytes {
		return key, store.Event{}, fmt.Errorf("%s: %d bytes, at most %d (events.maxEventBytes): %w", field, len(info), s.limits.MaxEventBytes, errs.ErrTooLarge)
	}
	return key, store.Event{
		Attempt: int32(e.GetAttempt()),
		Phase:   p,
		Version: int32(e.GetVersion()),
		Reason:  reasonOf(e),
		Info:    info,
	}, nil
}

// reasonOf is the short reason kept beside an event: its latest cluster
// event's reason (or message), else its error's code.
func reasonOf(e *workflow.ActionEvent) string {
	r := e.GetErrorInfo().GetCode()
	if ce := e.GetClusterEvents(); len(ce) > 0 {
		last := ce[len(ce)-1]
		r = last.GetReason()
		if r == "" {
			r = last.GetMessage()
		}
	}
	r = strings.ReplaceAll(r, "\x00", "") // PostgreSQL text holds no NUL
	if rs := []rune(r); len(rs) > maxReason {
		r = string(rs[:maxReason])
	}
	return r
}
