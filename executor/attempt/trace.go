package attempt

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"fmgr.dev/executor/machine"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
	"fmgr.dev/internal/tracing"
)

// maxOpenSpans bounds the attempts traced at once. Attempts whose end this
// manager does not see (it lost the executor lease) would otherwise stay
// open; past the bound one is ended, marked incomplete, for each new one.
const maxOpenSpans = 10000

// attemptSpans makes one span per attempt, from the moment it was queued
// to its end, with an event per phase it went through (INITIALIZING,
// RUNNING, ...): the same for every driver, since every driver records its
// attempts through Apply. With no tracer (Hooks.Tracer nil, tracing off)
// it keeps nothing.
type attemptSpans struct {
	tracer trace.Tracer
	mu     sync.Mutex
	open   map[attemptID]trace.Span
}

type attemptID struct {
	key store.ActionKey
	n   int32
}

func newAttemptSpans(t trace.Tracer) *attemptSpans {
	return &attemptSpans{tracer: t, open: map[attemptID]trace.Span{}}
}

// record follows what Apply wrote: a, the action before the write, went to
// updated through dec at time at.
func (s *attemptSpans) record(a, updated *store.Action, dec machine.Decision, at time.Time) {
	if s == nil || s.tracer == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	span := s.spanOf(a, at)
	switch dec := dec.(type) {
	case *machine.Retry:
		span.AddEvent(phase.Failed.String(), trace.WithTimestamp(at))
		s.end(a, span, phase.Failed, &dec.Cause, at)
		// The next attempt is queued from now.
		s.spanOf(updated, at)
	case *machine.Terminal:
		span.AddEvent(dec.Phase.String(), trace.WithTimestamp(at))
		s.end(a, span, dec.Phase, dec.Error, at)
	default:
		if updated.Phase != a.Phase {
			span.AddEvent(updated.Phase.String(), trace.WithTimestamp(at))
		}
	}
}

// spanOf is the open span of a's current attempt, started when first seen:
// from the action's creation for its first attempt, else from when the
// attempt was queued (a's last write, while it is queued), else now.
func (s *attemptSpans) spanOf(a *store.Action, at time.Time) trace.Span {
	id := attemptID{a.ActionKey, a.Attempts}
	if span, ok := s.open[id]; ok {
		return span
	}
	start := at
	switch {
	case a.Attempts <= 1 && !a.CreatedAt.IsZero():
		start = a.CreatedAt
	case a.Phase.Pending() && !a.UpdatedAt.IsZero():
		start = a.UpdatedAt
	}
	if len(s.open) >= maxOpenSpans {
		s.evict()
	}
	_, span := s.tracer.Start(context.Background(), "attempt",
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(start),
		trace.WithAttributes(
			tracing.AttrProject.String(a.Project),
			tracing.AttrDomain.String(a.Domain),
			tracing.AttrRun.String(a.RunName),
			tracing.AttrAction.String(a.Name),
			tracing.AttrAttempt.Int64(int64(a.Attempts)),
			attribute.String("flyte.task_type", a.TaskType),
		))
	span.AddEvent(phase.Queued.String(), trace.WithTimestamp(start))
	s.open[id] = span
	return span
}

// end ends a's current attempt's span in ph, with e its error (nil for
// none).
func (s *attemptSpans) end(a *store.Action, span trace.Span, ph phase.Phase, e *machine.Error, at time.Time) {
	span.SetAttributes(tracing.AttrPhase.String(ph.String()))
	if e != nil {
		span.SetAttributes(tracing.AttrErrorKind.String(e.Kind.String()), tracing.AttrErrorCode.String(e.Code))
		span.SetStatus(codes.Error, e.Code)
	}
	span.End(trace.WithTimestamp(at))
	delete(s.open, attemptID{a.ActionKey, a.Attempts})
}

// evict ends one open span as incomplete (any: map order).
func (s *attemptSpans) evict() {
	for id, span := range s.open {
		span.SetAttributes(attribute.Bool("flyte.attempt.incomplete", true))
		span.End()
		delete(s.open, id)
		return
	}
}
