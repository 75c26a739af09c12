// Package machine is the executor's one state machine for an action and its
// attempts. It is pure: no clock, no I/O, no goroutines. A driver (local host
// processes or Kubernetes) feeds it Events; Transition answers with the next
// State and a Decision (retry with a new attempt, stop at a terminal phase, or
// nothing to do). Both drivers apply the same rules:
//
//   - user retries only for RECOVERABLE user errors, up to
//     TaskMetadata.retries.retries; NON_RECOVERABLE fails at once;
//   - system failures the platform caused (an attempt it could not launch,
//     one orphaned by a manager restart) are retried up to
//     Policy.MaxSystemRetries, independently of the user budget; a SYSTEM
//     error the task reports itself is retried within the task's retries;
//   - a timeout ends the action TIMED_OUT;
//   - an abort ends any non-terminal action ABORTED;
//   - terminal phases absorb every later event (no resurrection).
//
// Phases are fmgr.dev/internal/phase, the one phase type of the machine, the
// store and the views.
package machine

import (
	"errors"
	"fmt"
	"math"
	"time"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/phase"
)

// DefaultMaxSystemRetries bounds retries after system failures when the
// configuration says nothing (the reference executor's maxSystemFailures).
const DefaultMaxSystemRetries = 3

// ErrInvalidTransition: the event cannot happen in the current phase (or the
// state itself is corrupt). It wraps errs.ErrPrecondition.
var ErrInvalidTransition = fmt.Errorf("invalid transition: %w", errs.ErrPrecondition)

// State is everything the machine needs to know about an action.
type State struct {
	Phase phase.Phase
	// Attempt is the current attempt number, 1-based.
	Attempt uint32
	// UserRetries and SystemRetries count retries already paid from each
	// budget.
	UserRetries   uint32
	SystemRetries uint32
}

// New is the state of a freshly created action: QUEUED, attempt 1.
func New() State { return State{Phase: phase.Queued, Attempt: 1} }

// Validate reports a state the machine cannot work from.
func (s State) Validate() error {
	if !valid(s.Phase) {
		return fmt.Errorf("phase %s: %w", s.Phase, ErrInvalidTransition)
	}
	if s.Attempt == 0 {
		return fmt.Errorf("attempt 0 (attempts are 1-based): %w", ErrInvalidTransition)
	}
	if s.UserRetries+s.SystemRetries >= s.Attempt {
		return fmt.Errorf("attempt %d after %d user and %d system retries: %w",
			s.Attempt, s.UserRetries, s.SystemRetries, ErrInvalidTransition)
	}
	return nil
}

// valid reports whether p is a phase the machine can work from: pending,
// active or terminal. PAUSED and UNSPECIFIED are not.
func valid(p phase.Phase) bool {
	return p.Pending() || p.Active() || p.Terminal()
}

// Backoff paces retries: the n-th retry (0-indexed) waits
// min(Base * Factor^n, Cap), the formula of flyte.Backoff. Factor below 1
// counts as 1; Cap 0 means uncapped.
type Backoff struct {
	Base   time.Duration
	Factor float64
	Cap    time.Duration
}

// Delay is the wait before the n-th retry (0-indexed).
func (b Backoff) Delay(n uint32) time.Duration {
	if b.Base <= 0 {
		return 0
	}
	f := b.Factor
	if f < 1 || math.IsNaN(f) {
		f = 1
	}
	d := float64(b.Base) * math.Pow(f, float64(n))
	if b.Cap > 0 && d > float64(b.Cap) {
		return b.Cap
	}
	if d >= math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(d)
}

// Policy holds the retry budgets of one action.
type Policy struct {
	// MaxUserRetries is TaskMetadata.retries.retries: attempts = 1 + retries
	// when only user errors happen.
	MaxUserRetries uint32
	// MaxSystemRetries bounds retries after system failures.
	MaxSystemRetries uint32
	// UserBackoff paces user retries (TaskMetadata.retries.backoff).
	UserBackoff Backoff
	// SystemBackoff paces system retries.
	SystemBackoff Backoff
}

// PolicyFor builds the policy of a task from its metadata and the configured
// system retry bound.
func PolicyFor(md *core.TaskMetadata, maxSystemRetries uint32) Policy {
	p := Policy{
		MaxUserRetries:   md.GetRetries().GetRetries(),
		MaxSystemRetries: maxSystemRetries,
	}
	if b := md.GetRetries().GetBackoff(); b != nil {
		p.UserBackoff = Backoff{
			Base:   b.GetBase().AsDuration(),
			Factor: b.GetFactor(),
			Cap:    b.GetCap().AsDuration(),
		}
	}
	return p
}

// Transition applies ev to s under policy p. It never panics: an event that
// cannot happen in s.Phase (or a corrupt s) returns s unchanged and an error
// wrapping ErrInvalidTransition. Terminal states absorb every event with an
// *Ignored decision.
func Transition(s State, ev Event, p Policy) (State, Decision, error) {
	if err := s.Validate(); err != nil {
		return s, nil, err
	}
	if ev == nil {
		return s, nil, fmt.Errorf("nil event: %w", ErrInvalidTransition)
	}
	if s.Phase.Terminal() {
		return s, &Ignored{Reason: fmt.Sprintf("%s after the action ended %s", ev.Name(), s.Phase)}, nil
	}
	if e, ok := ev.(AbortRequested); ok {
		return abort(s, e)
	}
	switch a := ev.attempt(); {
	case a == 0 || a == s.Attempt:
	case a < s.Attempt:
		return s, &Ignored{Reason: fmt.Sprintf("%s for attempt %d, current attempt is %d", ev.Name(), a, s.Attempt)}, nil
	default:
		return s, nil, fmt.Errorf("%s for attempt %d, current attempt is %d: %w", ev.Name(), a, s.Attempt, ErrInvalidTransition)
	}

	switch e := ev.(type) {
	case Wait:
		switch {
		case s.Phase == phase.Queued:
			s.Phase = phase.WaitingForResources
			return s, nil, nil
		case s.Phase == phase.WaitingForResources:
			return s, nil, nil
		}
	case Start:
		if s.Phase.Pending() {
			s.Phase = phase.Initializing
			return s, nil, nil
		}
	case Running:
		if s.Phase.Active() {
			s.Phase = phase.Running
			return s, nil, nil
		}
	case Succeeded:
		// From a pending phase this is a cache hit: no attempt ran.
		s.Phase = phase.Succeeded
		return s, &Terminal{Phase: phase.Succeeded, Reason: "succeeded"}, nil
	case Recovered:
		if s.Phase.Pending() {
			s.Phase = phase.Recovered
			return s, &Terminal{Phase: phase.Recovered, Reason: "recovered from the source run"}, nil
		}
	case TimedOut:
		code := e.Code
		if code == "" {
			code = CodeMaxRuntime
		}
		msg := e.Message
		if msg == "" {
			msg = "attempt " + fmt.Sprint(s.Attempt) + " exceeded its time limit"
		}
		stop := s.Phase.Active()
		s.Phase = phase.TimedOut
		return s, &Terminal{
			Phase:       phase.TimedOut,
			Error:       &Error{Kind: KindUser, Code: code, Message: msg},
			StopAttempt: stop,
			Reason:      "timed out: " + code,
		}, nil
	case Failed:
		if e.Kind != KindUnknown && e.Kind != KindUser && e.Kind != KindSystem {
			return s, nil, fmt.Errorf("failure of kind %d: %w", e.Kind, ErrInvalidTransition)
		}
		return fail(s, p, Error{Kind: e.Kind, Code: e.Code, Message: e.Message, Recoverable: e.Recoverable, Reported: e.Reported}, false)
	case Crashed:
		msg := e.Message
		if msg == "" {
			msg = crashMessage(e)
		}
		return fail(s, p, Error{Kind: KindUser, Code: CodeCrashed, Message: msg, Recoverable: true}, false)
	case Orphaned:
		if s.Phase.Active() {
			msg := e.Message
			if msg == "" {
				msg = fmt.Sprintf("attempt %d lost its process (manager restart)", s.Attempt)
			}
			return fail(s, p, Error{Kind: KindSystem, Code: CodeOrphaned, Message: msg, Recoverable: true}, true)
		}
	default:
		return s, nil, fmt.Errorf("unknown event %T: %w", ev, ErrInvalidTransition)
	}
	return s, nil, fmt.Errorf("%s in phase %s: %w", ev.Name(), s.Phase, ErrInvalidTransition)
}

func abort(s State, e AbortRequested) (State, Decision, error) {
	stop := s.Phase.Active()
	s.Phase = phase.Aborted
	reason := e.Reason
	if reason == "" {
		reason = "aborted"
	}
	if e.By != "" {
		reason += " (by " + e.By + ")"
	}
	return s, &Terminal{Phase: phase.Aborted, StopAttempt: stop, Reason: reason}, nil
}

// fail decides between a retry and FAILED. Errors of SYSTEM origin that the
// platform caused draw on the system budget; everything the task reported
// (USER, UNKNOWN — what the SDK reports for exceptions it cannot attribute —
// and SYSTEM errors the task raised itself) on the task's own retries.
func fail(s State, p Policy, cause Error, stop bool) (State, Decision, error) {
	system := cause.Kind == KindSystem && !cause.Reported
	terminal := func(reason string) (State, Decision, error) {
		s.Phase = phase.Failed
		c := cause
		return s, &Terminal{Phase: phase.Failed, Error: &c, StopAttempt: stop, Reason: reason}, nil
	}
	if !cause.Recoverable {
		return terminal("non-recoverable " + cause.Kind.String() + " error")
	}
	used, limit, budget := &s.UserRetries, p.MaxUserRetries, "user"
	if system {
		used, limit, budget = &s.SystemRetries, p.MaxSystemRetries, "system"
	}
	if *used >= limit {
		if system {
			// The cause is the platform's, so it says nothing of the
			// budget: the user must learn why it was not retried.
			cause.Message += fmt.Sprintf(" (not retried: the system retry budget is spent, %d of %d used)", *used, limit)
		}
		return terminal(fmt.Sprintf("%s retries exhausted (%d of %d used)", budget, *used, limit))
	}
	n := *used
	*used++
	s.Attempt++
	s.Phase = phase.Queued
	delay := p.UserBackoff.Delay(n)
	if system {
		delay = p.SystemBackoff.Delay(n)
	}
	return s, &Retry{
		Attempt:     s.Attempt,
		System:      system,
		Cause:       cause,
		Delay:       delay,
		StopAttempt: stop,
		Reason:      fmt.Sprintf("%s retry %d of %d after %s", budget, *used, limit, cause.Code),
	}, nil
}

func crashMessage(e Crashed) string {
	if e.Signal != "" {
		return "process killed by signal " + e.Signal
	}
	return fmt.Sprintf("process exited with code %d without an error document", e.ExitCode)
}

// IsInvalid reports whether err is an invalid transition.
func IsInvalid(err error) bool { return errors.Is(err, ErrInvalidTransition) }
