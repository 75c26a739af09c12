package machine

import (
	"sort"
	"time"

	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/phase"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Change is one phase change of one attempt, as the caller records it (the
// machine has no clock: the caller stamps At).
type Change struct {
	Attempt uint32
	Phase   phase.Phase
	At      time.Time
	// Error is the attempt's failure (FAILED, TIMED_OUT).
	Error  *Error
	Reason string
}

// Changes lists the attempt phase changes that a Transition from prev to next
// with decision d implies, in order. A retry yields two: the old attempt
// FAILED, the new one QUEUED. Nothing changed (or an Ignored event) yields
// none. The caller stamps At and stores them.
func Changes(prev, next State, d Decision) []Change {
	switch d := d.(type) {
	case *Ignored:
		return nil
	case *Retry:
		cause := d.Cause
		return []Change{
			{Attempt: prev.Attempt, Phase: phase.Failed, Error: &cause, Reason: d.Reason},
			{Attempt: d.Attempt, Phase: phase.Queued, Reason: d.Reason},
		}
	case *Terminal:
		return []Change{{Attempt: prev.Attempt, Phase: d.Phase, Error: d.Error, Reason: d.Reason}}
	}
	if prev.Phase == next.Phase && prev.Attempt == next.Attempt {
		return nil
	}
	return []Change{{Attempt: next.Attempt, Phase: next.Phase}}
}

// Stamp sets At on every change and returns them.
func Stamp(cs []Change, at time.Time) []Change {
	for i := range cs {
		cs[i].At = at
	}
	return cs
}

// Span is the time an attempt spent in one phase. End is zero while the span
// is open; a terminal span starts and ends at the same instant.
type Span struct {
	Phase phase.Phase
	Start time.Time
	End   time.Time
}

// Proto is the span as the API's PhaseTransition.
func (s Span) Proto() *workflow.PhaseTransition {
	pt := &workflow.PhaseTransition{Phase: s.Phase.Proto(), StartTime: timestamppb.New(s.Start)}
	if !s.End.IsZero() {
		pt.EndTime = timestamppb.New(s.End)
	}
	return pt
}

// AttemptHistory is one attempt's life, rebuilt from its changes.
type AttemptHistory struct {
	Attempt uint32
	// Phase is the attempt's latest phase.
	Phase phase.Phase
	Start time.Time
	// End is zero until the attempt reached a terminal phase.
	End time.Time
	// Error is the latest failure recorded for the attempt.
	Error *Error
	Spans []Span
}

// Attempts rebuilds per-attempt histories from recorded changes, in attempt
// order. Changes may come in any order; within an attempt they are ordered by
// At (ties keep their given order), repeated phases are folded into the first
// occurrence, and nothing after a terminal phase counts.
func Attempts(changes []Change) []AttemptHistory {
	cs := append([]Change(nil), changes...)
	sort.SliceStable(cs, func(i, j int) bool {
		if cs[i].Attempt != cs[j].Attempt {
			return cs[i].Attempt < cs[j].Attempt
		}
		return cs[i].At.Before(cs[j].At)
	})
	var out []AttemptHistory
	for _, c := range cs {
		if c.Attempt == 0 || !valid(c.Phase) {
			continue
		}
		if len(out) == 0 || out[len(out)-1].Attempt != c.Attempt {
			out = append(out, AttemptHistory{Attempt: c.Attempt, Phase: c.Phase, Start: c.At})
		} else {
			h := &out[len(out)-1]
			if h.Phase.Terminal() || h.Phase == c.Phase {
				continue
			}
			h.Spans[len(h.Spans)-1].End = c.At
			h.Phase = c.Phase
		}
		h := &out[len(out)-1]
		span := Span{Phase: c.Phase, Start: c.At}
		if c.Phase.Terminal() {
			span.End = c.At
			h.End = c.At
		}
		if c.Error != nil {
			e := *c.Error
			h.Error = &e
		}
		h.Spans = append(h.Spans, span)
	}
	return out
}
