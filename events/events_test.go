package events_test

import (
	"context"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"
	"gorm.io/gorm"

	"fmgr.dev/events"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/gen/go/flyteidl2/workflow/workflowconnect"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/pgtest"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/rpctest"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/runstate/statetest"
	"fmgr.dev/internal/server"
	"fmgr.dev/internal/store"
	"fmgr.dev/runs"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// harness serves EventsProxyService and RunService through the manager's
// real server (interceptors, error mapping) over a real database.
type harness struct {
	state  *runstate.Service
	st     *store.Store
	g      *gorm.DB
	events workflowconnect.EventsProxyServiceClient
	runs   workflowconnect.RunServiceClient
}

func eachDB(t *testing.T, fn func(t *testing.T, h *harness)) {
	eachDBWith(t, config.Default().Events, fn)
}

// eachDBWith is eachDB with the events service bounded by limits.
func eachDBWith(t *testing.T, limits config.Events, fn func(t *testing.T, h *harness)) {
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) {
		state, _, env := statetest.New(t, g, statetest.Options{}, runstate.NoExecutor)
		srvCfg := config.Default().Server
		srvCfg.Port = 0
		srv := server.New(srvCfg, env.Log)
		if err := events.Setup(srv, state, limits); err != nil {
			t.Fatal(err)
		}
		if err := runs.Setup(context.Background(), srv, state, env.Store, config.Projects{AutoCreate: true}, env.Log); err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(srv.Handler())
		t.Cleanup(hs.Close)
		fn(t, &harness{
			state: state, st: env.Store, g: g,
			events: workflowconnect.NewEventsProxyServiceClient(hs.Client(), hs.URL),
			runs:   workflowconnect.NewRunServiceClient(hs.Client(), hs.URL),
		})
	})
}

var runID = &common.RunIdentifier{Project: "flytesnacks", Domain: "development", Name: "r1"}

var rootID = &common.ActionIdentifier{Run: runID, Name: store.RootName}

func (h *harness) createRun(t *testing.T) *store.Action {
	t.Helper()
	return h.createRunNamed(t, runID.Name)
}

// createRunNamed creates the run name of runID's project and domain and
// returns its root action.
func (h *harness) createRunNamed(t *testing.T, name string) *store.Action {
	t.Helper()
	ctx := context.Background()
	runID := &common.RunIdentifier{Project: runID.Project, Domain: runID.Domain, Name: name}
	spec := &task.TaskSpec{TaskTemplate: &core.TaskTemplate{
		Id:        &core.Identifier{ResourceType: core.ResourceType_TASK, Project: runID.Project, Domain: runID.Domain, Name: "env.main", Version: "v1"},
		Type:      "python",
		Interface: &core.TypedInterface{},
		Target:    &core.TaskTemplate_Container{Container: &core.Container{Args: []string{"a0"}}},
	}}
	if _, err := h.state.CreateRun(ctx, &workflow.CreateRunRequest{
		Id:   &workflow.CreateRunRequest_RunId{RunId: runID},
		Task: &workflow.CreateRunRequest_TaskSpec{TaskSpec: spec},
	}); err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	a, err := h.st.Actions.Get(ctx, store.RunKey{Project: runID.Project, Domain: runID.Domain, RunName: runID.Name}.Action(store.RootName))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func pulled(version uint32) *workflow.ActionEvent {
	return &workflow.ActionEvent{
		Id: rootID, Attempt: 1, Phase: common.ActionPhase_ACTION_PHASE_QUEUED, Version: version,
		UpdatedTime:   timestamppb.Now(),
		Cluster:       "edge-1",
		ClusterEvents: []*workflow.ClusterEvent{{Reason: "Pulled", Message: "image pulled", Type: workflow.ClusterEvent_TYPE_NORMAL}},
	}
}

func (h *harness) record(evs ...*workflow.ActionEvent) error {
	_, err := h.events.Record(context.Background(), connect.NewRequest(&workflow.RecordRequest{Events: evs}))
	return err
}

func (h *harness) countEvents(t *testing.T, a *store.Action) int64 {
	t.Helper()
	var n int64
	if err := h.g.Raw("SELECT COUNT(*) FROM action_events WHERE action_id = ?", a.ID).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// The same event sent twice (in one request and again in another) is
// recorded once, and the details show it once.
func TestRecordIsIdempotent(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		a := h.createRun(t)
		before := h.countEvents(t, a) // the QUEUED of its creation
		ev := pulled(1)
		if err := h.record(ev, ev); err != nil {
			t.Fatal(err)
		}
		if err := h.record(ev); err != nil {
			t.Fatal(err)
		}
		if n := h.countEvents(t, a); n != before+1 {
			t.Fatalf("%d events, want %d", n, before+1)
		}
		resp, err := h.runs.GetActionDetails(context.Background(), connect.NewRequest(&workflow.GetActionDetailsRequest{ActionId: rootID}))
		if err != nil {
			t.Fatal(err)
		}
		atts := resp.Msg.GetDetails().GetAttempts()
		if len(atts) != 1 || len(atts[0].GetClusterEvents()) != 1 || atts[0].GetClusterEvents()[0].GetMessage() != "image pulled" ||
			len(atts[0].GetPhaseTransitions()) != 1 || atts[0].GetCluster() != "edge-1" {
			t.Fatalf("attempts = %v", atts)
		}
	})
}

// Bad input gets the right code and records nothing, not even the good
// events beside it.
func TestRecordRejectsBadInput(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		a := h.createRun(t)
		before := h.countEvents(t, a)
		with := func(edit func(e *workflow.ActionEvent)) *workflow.ActionEvent {
			e := pulled(7)
			edit(e)
			return e
		}
		for _, tc := range []struct {
			name  string
			evs   []*workflow.ActionEvent
			code  connect.Code
			words string
		}{
			{"no events", nil, connect.CodeInvalidArgument, "at least one"},
			{"no id", []*workflow.ActionEvent{pulled(2), with(func(e *workflow.ActionEvent) { e.Id = nil })}, connect.CodeInvalidArgument, "events[1].id"},
			{"bad project", []*workflow.ActionEvent{with(func(e *workflow.ActionEvent) {
				e.Id = &common.ActionIdentifier{Run: &common.RunIdentifier{Project: "Not A Project!", Domain: "development", Name: "r1"}, Name: "a0"}
			})}, connect.CodeInvalidArgument, "events[0].id.run.project"},
			{"attempt zero", []*workflow.ActionEvent{with(func(e *workflow.ActionEvent) { e.Attempt = 0 })}, connect.CodeInvalidArgument, "attempt"},
			{"no phase", []*workflow.ActionEvent{with(func(e *workflow.ActionEvent) { e.Phase = 0 })}, connect.CodeInvalidArgument, "phase"},
			{"unknown phase", []*workflow.ActionEvent{with(func(e *workflow.ActionEvent) { e.Phase = 99 })}, connect.CodeInvalidArgument, "phase"},
			{"unknown action", []*workflow.ActionEvent{pulled(2), with(func(e *workflow.ActionEvent) {
				e.Id = &common.ActionIdentifier{Run: runID, Name: "nope"}
			})}, connect.CodeNotFound, "nope"},
			{"unknown attempt", []*workflow.ActionEvent{pulled(2), with(func(e *workflow.ActionEvent) { e.Attempt = 4 })}, connect.CodeNotFound, "attempt 4"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				rpctest.WantCode(t, h.record(tc.evs...), tc.code, tc.words)
			})
		}
		if n := h.countEvents(t, a); n != before {
			t.Fatalf("bad requests recorded %d events", n-before)
		}
	})
}

// A recorded event changes no action row, yet WatchActionDetails sends a
// new snapshot that shows it; an event that would change the action's phase
// (a FAILED of its QUEUED attempt) is refused and shows nowhere.
func TestRecordWakesActionWatchers(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		a := h.createRun(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		stream, err := h.runs.WatchActionDetails(ctx, connect.NewRequest(&workflow.WatchActionDetailsRequest{ActionId: rootID}))
		if err != nil {
			t.Fatal(err)
		}
		defer stream.Close()
		if !stream.Receive() {
			t.Fatalf("no snapshot: %v", stream.Err())
		}
		if n := len(stream.Msg().GetDetails().GetAttempts()[0].GetClusterEvents()); n != 0 {
			t.Fatalf("snapshot has %d cluster events before any was recorded", n)
		}
		failed := pulled(1)
		failed.Phase = common.ActionPhase_ACTION_PHASE_FAILED
		failed.ErrorInfo = &workflow.ErrorInfo{Message: "forged"}
		rpctest.WantCode(t, h.record(failed), connect.CodeFailedPrecondition, "attempt 1", "is QUEUED", "FAILED contradicts")
		if err := h.record(pulled(1)); err != nil {
			t.Fatal(err)
		}
		if !stream.Receive() {
			t.Fatalf("no snapshot after the event: %v", stream.Err())
		}
		d := stream.Msg().GetDetails()
		att := d.GetAttempts()[0]
		ce := att.GetClusterEvents()
		if len(ce) != 1 || ce[0].GetReason() != "Pulled" {
			t.Fatalf("cluster events after Record: %v", ce)
		}
		if d.GetStatus().GetPhase() != common.ActionPhase_ACTION_PHASE_QUEUED || att.GetPhase() != common.ActionPhase_ACTION_PHASE_QUEUED ||
			len(att.GetPhaseTransitions()) != 1 || att.GetErrorInfo() != nil {
			t.Fatalf("details after Record: status %v, attempt %v", d.GetStatus(), att)
		}
		after, err := h.st.Actions.Get(ctx, a.ActionKey)
		if err != nil {
			t.Fatal(err)
		}
		if after.Phase != a.Phase || after.ResourceVersion != a.ResourceVersion || after.ErrorInfo != nil || after.EndedAt != nil {
			t.Fatalf("the action row changed: %+v, was %+v", after, a)
		}
	})
}

// A report may add news about the phase its attempt is in, never another
// phase, and nothing new once the attempt ended; re-sending what was
// recorded stays harmless. The history and the details, the action's and
// the attempt's phase, say what the executor recorded.
func TestRecordRefusesForgedHistory(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		a := h.createRun(t)
		before := h.countEvents(t, a)
		in := func(p common.ActionPhase, version uint32) *workflow.ActionEvent {
			e := pulled(version)
			e.Phase = p
			return e
		}
		const (
			queued    = common.ActionPhase_ACTION_PHASE_QUEUED
			running   = common.ActionPhase_ACTION_PHASE_RUNNING
			succeeded = common.ActionPhase_ACTION_PHASE_SUCCEEDED
			failed    = common.ActionPhase_ACTION_PHASE_FAILED
		)
		rpctest.WantCode(t, h.record(in(running, 0)), connect.CodeFailedPrecondition, "is QUEUED", "RUNNING contradicts")
		rpctest.WantCode(t, h.record(in(succeeded, 0)), connect.CodeFailedPrecondition, "is QUEUED", "SUCCEEDED contradicts")
		if err := h.record(in(queued, 1)); err != nil {
			t.Fatal(err)
		}
		// The executor ends the attempt.
		if _, err := h.st.Actions.Update(ctx, a.ActionKey, store.AnyVersion, store.Update{Phase: phase.Succeeded}); err != nil {
			t.Fatal(err)
		}
		if err := h.record(in(queued, 1)); err != nil {
			t.Fatalf("re-sending a recorded event: %v", err)
		}
		for _, tc := range []struct {
			name string
			ev   *workflow.ActionEvent
		}{
			{"news after the end", in(queued, 2)},
			{"its own terminal phase again", in(succeeded, 1)},
			{"a failure after success", in(failed, 0)},
		} {
			t.Run(tc.name, func(t *testing.T) {
				rpctest.WantCode(t, h.record(in(queued, 1), tc.ev), connect.CodeFailedPrecondition, "attempt 1", "ended SUCCEEDED", "closed")
			})
		}
		if n := h.countEvents(t, a); n != before+2 { // the report while QUEUED and the executor's SUCCEEDED
			t.Fatalf("%d events, want %d", n, before+2)
		}
		resp, err := h.runs.GetActionDetails(ctx, connect.NewRequest(&workflow.GetActionDetailsRequest{ActionId: rootID}))
		if err != nil {
			t.Fatal(err)
		}
		d := resp.Msg.GetDetails()
		att := d.GetAttempts()[0]
		var phases []common.ActionPhase
		for _, pt := range att.GetPhaseTransitions() {
			phases = append(phases, pt.GetPhase())
		}
		if d.GetStatus().GetPhase() != succeeded || att.GetPhase() != succeeded || !slices.Equal(phases, []common.ActionPhase{queued, succeeded}) ||
			att.GetErrorInfo() != nil || len(att.GetClusterEvents()) != 1 {
			t.Fatalf("details: status %v, attempt phase %v, transitions %v, error %v, cluster events %v",
				d.GetStatus(), att.GetPhase(), phases, att.GetErrorInfo(), att.GetClusterEvents())
		}
	})
}

// A report's own time (updated_time) cannot reorder the history: a report
// of the running attempt that claims to be from 2001 still comes after the
// attempt's QUEUED, so the transitions stay QUEUED, RUNNING.
func TestRecordKeepsHistoryOrder(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		a := h.createRun(t)
		if _, err := h.st.Actions.Update(ctx, a.ActionKey, store.AnyVersion, store.Update{Phase: phase.Running}); err != nil {
			t.Fatal(err)
		}
		early := pulled(1)
		early.Phase = common.ActionPhase_ACTION_PHASE_RUNNING
		early.UpdatedTime = timestamppb.New(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
		if err := h.record(early); err != nil {
			t.Fatal(err)
		}
		resp, err := h.runs.GetActionDetails(ctx, connect.NewRequest(&workflow.GetActionDetailsRequest{ActionId: rootID}))
		if err != nil {
			t.Fatal(err)
		}
		att := resp.Msg.GetDetails().GetAttempts()[0]
		var phases []common.ActionPhase
		for _, pt := range att.GetPhaseTransitions() {
			phases = append(phases, pt.GetPhase())
			if pt.GetStartTime().AsTime().Year() == 2001 {
				t.Errorf("transition %v starts at the report's time", pt)
			}
		}
		if want := []common.ActionPhase{common.ActionPhase_ACTION_PHASE_QUEUED, common.ActionPhase_ACTION_PHASE_RUNNING}; !slices.Equal(phases, want) {
			t.Fatalf("transitions %v, want %v", phases, want)
		}
		if ce := att.GetClusterEvents(); len(ce) != 1 || ce[0].GetReason() != "Pulled" {
			t.Fatalf("cluster events %v", ce)
		}
	})
}

// The bounds of events.*: a version beyond the events an attempt may hold,
// an event larger than maxEventBytes, a history past maxAttemptBytes or
// maxPerAttempt are refused and record nothing; the executor's own events
// are never refused, but count.
func TestRecordBounds(t *testing.T) {
	limits := config.Events{MaxPerAttempt: 5, MaxEventBytes: 1000, MaxAttemptBytes: 2500}
	eachDBWith(t, limits, func(t *testing.T, h *harness) {
		ctx := context.Background()
		on := func(a *store.Action, version uint32, message int) *workflow.ActionEvent {
			e := pulled(version)
			e.Id = &common.ActionIdentifier{Run: &common.RunIdentifier{Project: runID.Project, Domain: runID.Domain, Name: a.RunName}, Name: a.Name}
			e.ClusterEvents[0].Message = strings.Repeat("m", message)
			return e
		}
		bytes := h.createRunNamed(t, "bytes")
		rpctest.WantCode(t, h.record(on(bytes, 5, 10)), connect.CodeInvalidArgument, "events[0].version", "5", "below 5")
		rpctest.WantCode(t, h.record(on(bytes, 1, 1000)), connect.CodeResourceExhausted, "events[0]", "at most 1000", "events.maxEventBytes")
		// 900 bytes and more each: two fit in 2500, three do not.
		if err := h.record(on(bytes, 1, 900), on(bytes, 2, 900)); err != nil {
			t.Fatal(err)
		}
		before := h.countEvents(t, bytes)
		rpctest.WantCode(t, h.record(on(bytes, 3, 10), on(bytes, 4, 900)), connect.CodeResourceExhausted, "at most 2500 bytes", "events.maxAttemptBytes")
		if n := h.countEvents(t, bytes); n != before {
			t.Fatalf("a refused request recorded %d events", n-before)
		}

		count := h.createRunNamed(t, "count") // its QUEUED is the first of five
		if err := h.record(on(count, 1, 10), on(count, 2, 10), on(count, 3, 10)); err != nil {
			t.Fatal(err)
		}
		if _, err := h.st.Actions.Update(ctx, count.ActionKey, store.AnyVersion, store.Update{Phase: phase.Running}); err != nil {
			t.Fatalf("the executor's event, the fifth: %v", err)
		}
		running := on(count, 1, 10)
		running.Phase = common.ActionPhase_ACTION_PHASE_RUNNING
		rpctest.WantCode(t, h.record(running), connect.CodeResourceExhausted, "at most 5 events", "events.maxPerAttempt")
		if _, err := h.st.Actions.Update(ctx, count.ActionKey, store.AnyVersion, store.Update{Phase: phase.Succeeded}); err != nil {
			t.Fatalf("the executor's event past the bound: %v", err)
		}
		if n := h.countEvents(t, count); n != 6 {
			t.Fatalf("%d events, want 6 (the executor's three, three reports)", n)
		}
	})
}

// WatchClusterEvents sends an attempt's cluster events recorded so far,
// then each new one once, and ends when the attempt ends.
func TestWatchClusterEvents(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		a := h.createRun(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		missing, err := h.runs.WatchClusterEvents(ctx, connect.NewRequest(&workflow.WatchClusterEventsRequest{Id: rootID, Attempt: 2}))
		if err != nil {
			t.Fatal(err)
		}
		if missing.Receive() {
			t.Fatalf("attempt 2 of a one-attempt action sent %v", missing.Msg())
		}
		rpctest.WantCode(t, missing.Err(), connect.CodeNotFound, "attempt 2")

		if err := h.record(pulled(1)); err != nil {
			t.Fatal(err)
		}
		stream, err := h.runs.WatchClusterEvents(ctx, connect.NewRequest(&workflow.WatchClusterEventsRequest{Id: rootID, Attempt: 1}))
		if err != nil {
			t.Fatal(err)
		}
		defer stream.Close()
		receive := func(want string) {
			t.Helper()
			if !stream.Receive() {
				t.Fatalf("stream ended: %v", stream.Err())
			}
			ce := stream.Msg().GetClusterEvents()
			if len(ce) != 1 || ce[0].GetMessage() != want {
				t.Fatalf("cluster events %v, want one %q", ce, want)
			}
		}
		receive("image pulled")
		later := pulled(2)
		later.ClusterEvents[0].Message = "container started"
		if err := h.record(later, pulled(1)); err != nil { // the old one again: not sent twice
			t.Fatal(err)
		}
		receive("container started")
		if _, err := h.st.Actions.Update(ctx, a.ActionKey, store.AnyVersion, store.Update{Phase: phase.Succeeded}); err != nil {
			t.Fatal(err)
		}
		if stream.Receive() {
			t.Fatalf("after the attempt ended: %v, want the end of the stream", stream.Msg())
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("stream ended with %v", err)
		}
	})
}
