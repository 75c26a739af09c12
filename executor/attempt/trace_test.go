package attempt_test

import (
	"context"
	"slices"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/core"
)

// Every attempt an executor records through Apply is one span, from when
// it was queued to its end, with the run, action and attempt number, an
// event per phase, and the ending's phase and error kind: the first
// attempt fails and is retried, the second succeeds.
func TestAttemptSpans(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		a := f.run(t, "rtraced", template("t.traced", &core.Container{Args: []string{"a0"}}, &core.TaskMetadata{Retries: &core.RetryStrategy{Retries: 1}}), nil)
		c := attempt.New(f.state, attempt.Options{Fence: f.hold(t), Hooks: attempt.Hooks{Tracer: tp.Tracer("test")}})
		spec, err := c.Spec(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range []machine.Event{
			machine.Start{Attempt: 1}, machine.Running{Attempt: 1},
			machine.Failed{Attempt: 1, Kind: machine.KindUser, Recoverable: true, Code: "Boom", Message: "m"},
			machine.Start{Attempt: 2}, machine.Running{Attempt: 2}, machine.Succeeded{Attempt: 2},
		} {
			if a, _, err = c.Apply(ctx, a, spec, ev, attempt.Record{}); err != nil {
				t.Fatalf("%s: %v", ev.Name(), err)
			}
		}

		ended := rec.Ended()
		if len(ended) != 2 || len(rec.Started()) != 2 {
			t.Fatalf("%d spans started, %d ended, want 2 and 2", len(rec.Started()), len(ended))
		}
		for i, want := range []struct {
			phase, kind string
			events      []string
			status      codes.Code
		}{
			{"FAILED", "USER", []string{"QUEUED", "INITIALIZING", "RUNNING", "FAILED"}, codes.Error},
			{"SUCCEEDED", "", []string{"QUEUED", "INITIALIZING", "RUNNING", "SUCCEEDED"}, codes.Unset},
		} {
			s := ended[i]
			attrs := map[attribute.Key]string{}
			for _, kv := range s.Attributes() {
				attrs[kv.Key] = kv.Value.Emit()
			}
			for k, v := range map[attribute.Key]string{"flyte.project": "p", "flyte.domain": "development", "flyte.run": "rtraced",
				"flyte.action": "a0", "flyte.attempt": []string{"1", "2"}[i], "flyte.phase": want.phase, "flyte.error.kind": want.kind} {
				if attrs[k] != v {
					t.Errorf("attempt %d: %s = %q, want %q", i+1, k, attrs[k], v)
				}
			}
			var events []string
			for _, e := range s.Events() {
				events = append(events, e.Name)
			}
			if !slices.Equal(events, want.events) {
				t.Errorf("attempt %d: events %v, want %v", i+1, events, want.events)
			}
			if s.Status().Code != want.status {
				t.Errorf("attempt %d: status %v, want %v", i+1, s.Status(), want.status)
			}
			if s.EndTime().Before(s.StartTime()) {
				t.Errorf("attempt %d: ends before it starts", i+1)
			}
		}
		if !ended[0].StartTime().Equal(a.CreatedAt) {
			t.Errorf("the first attempt's span starts at %s, want the run's creation %s", ended[0].StartTime(), a.CreatedAt)
		}
	})
}
