package machine

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/phase"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestErrorKindsMatchWire(t *testing.T) {
	if int32(KindUser) != int32(core.ExecutionError_USER) || int32(KindSystem) != int32(core.ExecutionError_SYSTEM) {
		t.Error("error kinds differ from core.ExecutionError.ErrorKind")
	}
}

func st(p phase.Phase, attempt, user, system uint32) State {
	return State{Phase: p, Attempt: attempt, UserRetries: user, SystemRetries: system}
}

var (
	userRecoverable    = Failed{Kind: KindUser, Recoverable: true, Code: "ValueError", Message: "boom"}
	userNonRecoverable = Failed{Kind: KindUser, Recoverable: false, Code: "NonRecoverableError", Message: "stop"}
	systemRecoverable  = Failed{Kind: KindSystem, Recoverable: true, Code: "StorageError", Message: "flaky"}
	systemFatal        = Failed{Kind: KindSystem, Recoverable: false, Code: "UsageError", Message: "bad args"}
	systemReported     = Failed{Kind: KindSystem, Recoverable: true, Code: "RuntimeSystemError", Message: "raised", Reported: true}
	unknownRecoverable = Failed{Kind: KindUnknown, Recoverable: true, Code: "Weird", Message: "?"}
)

func TestTransition(t *testing.T) {
	two := Policy{MaxUserRetries: 2, MaxSystemRetries: 3}
	none := Policy{MaxSystemRetries: 3}
	type want struct {
		state    State
		decision string      // "", "retry", "terminal", "ignored"
		phase    phase.Phase // terminal phase
		system   bool        // retry paid by the system budget
		stop     bool        // StopAttempt
		code     string      // error code of the terminal error / retry cause
		err      bool
	}
	cases := []struct {
		name   string
		state  State
		event  Event
		policy Policy
		want   want
	}{
		// The happy path.
		{"start from queued", New(), Start{}, none, want{state: st(phase.Initializing, 1, 0, 0)}},
		{"start names its attempt", New(), Start{Attempt: 1}, none, want{state: st(phase.Initializing, 1, 0, 0)}},
		{"running from initializing", st(phase.Initializing, 1, 0, 0), Running{}, none, want{state: st(phase.Running, 1, 0, 0)}},
		{"running again is a no-op", st(phase.Running, 1, 0, 0), Running{}, none, want{state: st(phase.Running, 1, 0, 0)}},
		{"succeeded from running", st(phase.Running, 1, 0, 0), Succeeded{}, none,
			want{state: st(phase.Succeeded, 1, 0, 0), decision: "terminal", phase: phase.Succeeded}},
		{"succeeded straight from initializing", st(phase.Initializing, 1, 0, 0), Succeeded{}, none,
			want{state: st(phase.Succeeded, 1, 0, 0), decision: "terminal", phase: phase.Succeeded}},
		{"cache hit from queued", New(), Succeeded{}, none,
			want{state: st(phase.Succeeded, 1, 0, 0), decision: "terminal", phase: phase.Succeeded}},
		{"recovered from queued", New(), Recovered{Attempt: 1}, none,
			want{state: st(phase.Recovered, 1, 0, 0), decision: "terminal", phase: phase.Recovered}},
		{"recovered while waiting", st(phase.WaitingForResources, 1, 0, 0), Recovered{}, none,
			want{state: st(phase.Recovered, 1, 0, 0), decision: "terminal", phase: phase.Recovered}},
		{"recovered once running", st(phase.Running, 1, 0, 0), Recovered{}, none, want{state: st(phase.Running, 1, 0, 0), err: true}},

		// Waiting for resources.
		{"wait from queued", New(), Wait{Reason: "cache reservation"}, none, want{state: st(phase.WaitingForResources, 1, 0, 0)}},
		{"wait again is a no-op", st(phase.WaitingForResources, 1, 0, 0), Wait{}, none, want{state: st(phase.WaitingForResources, 1, 0, 0)}},
		{"start after waiting", st(phase.WaitingForResources, 1, 0, 0), Start{}, none, want{state: st(phase.Initializing, 1, 0, 0)}},

		// Invalid transitions.
		{"start twice", st(phase.Initializing, 1, 0, 0), Start{}, none, want{state: st(phase.Initializing, 1, 0, 0), err: true}},
		{"start while running", st(phase.Running, 1, 0, 0), Start{}, none, want{state: st(phase.Running, 1, 0, 0), err: true}},
		{"wait while running", st(phase.Running, 1, 0, 0), Wait{}, none, want{state: st(phase.Running, 1, 0, 0), err: true}},
		{"running before start", New(), Running{}, none, want{state: New(), err: true}},
		{"orphan of a queued action", New(), Orphaned{}, none, want{state: New(), err: true}},
		{"event for a future attempt", st(phase.Running, 1, 0, 0), Succeeded{Attempt: 2}, none, want{state: st(phase.Running, 1, 0, 0), err: true}},
		{"nil event", New(), nil, none, want{state: New(), err: true}},
		{"unknown event", New(), bogus{}, none, want{state: New(), err: true}},
		{"failure of an undefined kind", st(phase.Running, 1, 0, 0), Failed{Kind: 7, Recoverable: true}, two,
			want{state: st(phase.Running, 1, 0, 0), err: true}},
		{"unspecified phase", State{Attempt: 1}, Start{}, none, want{state: State{Attempt: 1}, err: true}},
		{"paused phase", State{Phase: 9, Attempt: 1}, Start{}, none, want{state: State{Phase: 9, Attempt: 1}, err: true}},
		{"attempt zero", State{Phase: phase.Queued}, Start{}, none, want{state: State{Phase: phase.Queued}, err: true}},
		{"retries beyond attempts", st(phase.Running, 2, 1, 1), Running{}, none, want{state: st(phase.Running, 2, 1, 1), err: true}},

		// Stale events from an attempt that was already retried.
		{"stale success", st(phase.Queued, 2, 1, 0), Succeeded{Attempt: 1}, two,
			want{state: st(phase.Queued, 2, 1, 0), decision: "ignored"}},
		{"stale crash", st(phase.Running, 3, 1, 1), Crashed{Attempt: 2, ExitCode: 1}, two,
			want{state: st(phase.Running, 3, 1, 1), decision: "ignored"}},

		// User retries.
		{"recoverable user error retries", st(phase.Running, 1, 0, 0), userRecoverable, two,
			want{state: st(phase.Queued, 2, 1, 0), decision: "retry", code: "ValueError"}},
		{"second user retry", st(phase.Running, 2, 1, 0), userRecoverable, two,
			want{state: st(phase.Queued, 3, 2, 0), decision: "retry", code: "ValueError"}},
		{"user retries exhausted", st(phase.Running, 3, 2, 0), userRecoverable, two,
			want{state: st(phase.Failed, 3, 2, 0), decision: "terminal", phase: phase.Failed, code: "ValueError"}},
		{"no user retries configured", st(phase.Running, 1, 0, 0), userRecoverable, none,
			want{state: st(phase.Failed, 1, 0, 0), decision: "terminal", phase: phase.Failed, code: "ValueError"}},
		{"non-recoverable fails at once", st(phase.Running, 1, 0, 0), userNonRecoverable, two,
			want{state: st(phase.Failed, 1, 0, 0), decision: "terminal", phase: phase.Failed, code: "NonRecoverableError"}},
		{"unknown origin draws on the user budget", st(phase.Running, 1, 0, 0), unknownRecoverable, two,
			want{state: st(phase.Queued, 2, 1, 0), decision: "retry", code: "Weird"}},
		{"user failure before launch", New(), userNonRecoverable, two,
			want{state: st(phase.Failed, 1, 0, 0), decision: "terminal", phase: phase.Failed, code: "NonRecoverableError"}},

		// System retries.
		{"recoverable system error retries", st(phase.Running, 1, 0, 0), systemRecoverable, none,
			want{state: st(phase.Queued, 2, 0, 1), decision: "retry", system: true, code: "StorageError"}},
		// A SYSTEM error the task reported is the task's: its retries pay,
		// however spent the platform's budget is, and they run out.
		{"reported system error retries on the user budget", st(phase.Running, 4, 0, 3), systemReported, two,
			want{state: st(phase.Queued, 5, 1, 3), decision: "retry", code: "RuntimeSystemError"}},
		{"reported system error with user budget spent fails", st(phase.Running, 3, 2, 0), systemReported, two,
			want{state: st(phase.Failed, 3, 2, 0), decision: "terminal", phase: phase.Failed, code: "RuntimeSystemError"}},
		{"non-recoverable system error fails", st(phase.Running, 1, 0, 0), systemFatal, two,
			want{state: st(phase.Failed, 1, 0, 0), decision: "terminal", phase: phase.Failed, code: "UsageError"}},
		// A crash is the task's: it draws on the user budget.
		{"crash with retries=0 fails at once", st(phase.Running, 1, 0, 0), Crashed{ExitCode: 137, Signal: "killed"}, none,
			want{state: st(phase.Failed, 1, 0, 0), decision: "terminal", phase: phase.Failed, code: CodeCrashed}},
		{"crash retries on the user budget", st(phase.Running, 1, 0, 0), Crashed{ExitCode: 1}, two,
			want{state: st(phase.Queued, 2, 1, 0), decision: "retry", code: CodeCrashed}},
		{"crash with user budget spent fails", st(phase.Running, 3, 2, 0), Crashed{ExitCode: 1}, two,
			want{state: st(phase.Failed, 3, 2, 0), decision: "terminal", phase: phase.Failed, code: CodeCrashed}},
		{"user retry with system budget spent", st(phase.Running, 4, 0, 3), userRecoverable, two,
			want{state: st(phase.Queued, 5, 1, 3), decision: "retry", code: "ValueError"}},
		{"system retries exhausted", st(phase.Running, 4, 0, 3), Orphaned{}, two,
			want{state: st(phase.Failed, 4, 0, 3), decision: "terminal", phase: phase.Failed, stop: true, code: CodeOrphaned}},
		{"system retries disabled", st(phase.Running, 1, 0, 0), systemRecoverable, Policy{MaxUserRetries: 5},
			want{state: st(phase.Failed, 1, 0, 0), decision: "terminal", phase: phase.Failed, code: "StorageError"}},
		{"orphan retries and stops the old process", st(phase.Running, 1, 0, 0), Orphaned{}, none,
			want{state: st(phase.Queued, 2, 0, 1), decision: "retry", system: true, stop: true, code: CodeOrphaned}},
		{"orphan while initializing", st(phase.Initializing, 2, 1, 0), Orphaned{Attempt: 2}, two,
			want{state: st(phase.Queued, 3, 1, 1), decision: "retry", system: true, stop: true, code: CodeOrphaned}},
		{"orphan with system budget spent", st(phase.Running, 4, 0, 3), Orphaned{}, none,
			want{state: st(phase.Failed, 4, 0, 3), decision: "terminal", phase: phase.Failed, stop: true, code: CodeOrphaned}},

		// Timeouts.
		{"runtime timeout", st(phase.Running, 1, 0, 0), TimedOut{}, two,
			want{state: st(phase.TimedOut, 1, 0, 0), decision: "terminal", phase: phase.TimedOut, stop: true, code: CodeMaxRuntime}},
		{"queued timeout", New(), TimedOut{Code: CodeQueuedTimeout}, two,
			want{state: st(phase.TimedOut, 1, 0, 0), decision: "terminal", phase: phase.TimedOut, code: CodeQueuedTimeout}},
		{"deadline while waiting", st(phase.WaitingForResources, 2, 1, 0), TimedOut{Code: CodeDeadline}, two,
			want{state: st(phase.TimedOut, 2, 1, 0), decision: "terminal", phase: phase.TimedOut, code: CodeDeadline}},
	}

	// Abort from every non-terminal phase.
	for _, p := range []phase.Phase{phase.Queued, phase.WaitingForResources, phase.Initializing, phase.Running} {
		cases = append(cases, struct {
			name   string
			state  State
			event  Event
			policy Policy
			want   want
		}{"abort while " + p.String(), st(p, 2, 1, 0), AbortRequested{Reason: "user", By: "alice"}, two,
			want{state: st(phase.Aborted, 2, 1, 0), decision: "terminal", phase: phase.Aborted, stop: p.Active()}})
	}

	// Terminal phases absorb everything, RECOVERED included: the machine
	// knows the same terminal phases as the store.
	everything := []Event{
		Wait{}, Start{}, Running{}, Succeeded{}, userRecoverable, userNonRecoverable, systemRecoverable,
		TimedOut{}, Crashed{ExitCode: 1}, Orphaned{}, AbortRequested{}, Succeeded{Attempt: 9},
	}
	for _, p := range phase.Terminals() {
		for _, ev := range everything {
			cases = append(cases, struct {
				name   string
				state  State
				event  Event
				policy Policy
				want   want
			}{fmt.Sprintf("%s absorbs %s", p, ev.Name()), st(p, 2, 1, 0), ev, two,
				want{state: st(p, 2, 1, 0), decision: "ignored"}})
		}
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, d, err := Transition(tc.state, tc.event, tc.policy)
			if tc.want.err {
				if err == nil || !errors.Is(err, ErrInvalidTransition) || !errors.Is(err, errs.ErrPrecondition) {
					t.Fatalf("want invalid transition, got err=%v decision=%v", err, d)
				}
				if d != nil {
					t.Errorf("decision %v alongside an error", d)
				}
			} else if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got != tc.want.state {
				t.Errorf("state %+v, want %+v", got, tc.want.state)
			}
			switch tc.want.decision {
			case "":
				if d != nil {
					t.Errorf("decision %v, want none", d)
				}
			case "ignored":
				if _, ok := d.(*Ignored); !ok {
					t.Errorf("decision %v, want ignored", d)
				}
			case "retry":
				r, ok := d.(*Retry)
				if !ok {
					t.Fatalf("decision %v, want retry", d)
				}
				if r.Attempt != tc.state.Attempt+1 || r.Attempt != got.Attempt {
					t.Errorf("retry attempt %d, state attempt %d, previous %d", r.Attempt, got.Attempt, tc.state.Attempt)
				}
				if r.System != tc.want.system || r.StopAttempt != tc.want.stop || r.Cause.Code != tc.want.code {
					t.Errorf("retry %+v, want system=%v stop=%v code=%s", r, tc.want.system, tc.want.stop, tc.want.code)
				}
			case "terminal":
				term, ok := d.(*Terminal)
				if !ok {
					t.Fatalf("decision %v, want terminal", d)
				}
				if term.Phase != tc.want.phase || term.Phase != got.Phase || term.StopAttempt != tc.want.stop {
					t.Errorf("terminal %+v, want phase %s stop %v", term, tc.want.phase, tc.want.stop)
				}
				switch term.Phase {
				case phase.Failed, phase.TimedOut:
					if term.Error == nil || term.Error.Code != tc.want.code {
						t.Errorf("terminal error %v, want code %s", term.Error, tc.want.code)
					}
				default:
					if term.Error != nil {
						t.Errorf("terminal %s carries error %v", term.Phase, term.Error)
					}
				}
			}
		})
	}
}

type bogus struct{}

func (bogus) Name() string    { return "bogus" }
func (bogus) attempt() uint32 { return 0 }

// Drive a whole action: two user retries, three system retries, then the
// budgets run out in the order the events arrive.
func TestBudgetsAreIndependent(t *testing.T) {
	p := Policy{MaxUserRetries: 2, MaxSystemRetries: 3}
	s := New()
	step := func(ev Event) Decision {
		t.Helper()
		next, d, err := Transition(s, ev, p)
		if err != nil {
			t.Fatalf("%s in %+v: %v", ev.Name(), s, err)
		}
		s = next
		return d
	}
	failures := []Event{userRecoverable, Orphaned{}, Crashed{ExitCode: 1}, systemRecoverable, systemRecoverable}
	for i, ev := range failures {
		step(Start{Attempt: s.Attempt})
		if _, isOrphan := ev.(Orphaned); !isOrphan {
			step(Running{})
		}
		if r, ok := step(ev).(*Retry); !ok || r.Attempt != uint32(i+2) {
			t.Fatalf("failure %d (%s): want retry as attempt %d, state %+v", i, ev.Name(), i+2, s)
		}
	}
	if s != st(phase.Queued, 6, 2, 3) {
		t.Fatalf("after five retries: %+v", s)
	}
	step(Start{})
	step(Running{})
	d := step(Crashed{Signal: "killed"})
	term, ok := d.(*Terminal)
	if !ok || term.Phase != phase.Failed || term.Error.Kind != KindUser || term.Error.Message != "process killed by signal killed" {
		t.Fatalf("want FAILED after the user budget ran out, got %v (%+v)", d, term)
	}
	if s.Attempt != 6 {
		t.Errorf("attempts: %d", s.Attempt)
	}
}

func TestBackoff(t *testing.T) {
	b := Backoff{Base: time.Second, Factor: 2, Cap: 5 * time.Second}
	var got []time.Duration
	for n := uint32(0); n < 5; n++ {
		got = append(got, b.Delay(n))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("delays %v, want %v", got, want)
	}
	if d := (Backoff{Base: time.Second}).Delay(7); d != time.Second {
		t.Errorf("factor 0 acts as 1: %v", d)
	}
	if d := (Backoff{}).Delay(3); d != 0 {
		t.Errorf("no base: %v", d)
	}
	if d := (Backoff{Base: time.Hour, Factor: 10}).Delay(400); d <= 0 {
		t.Errorf("uncapped overflow: %v", d)
	}

	p := Policy{MaxUserRetries: 3, UserBackoff: b, SystemBackoff: Backoff{Base: time.Millisecond}, MaxSystemRetries: 1}
	s := st(phase.Running, 2, 1, 0)
	_, d, _ := Transition(s, userRecoverable, p)
	if r := d.(*Retry); r.Delay != 2*time.Second {
		t.Errorf("second user retry waits %v", r.Delay)
	}
	_, d, _ = Transition(s, Orphaned{}, p)
	if r := d.(*Retry); r.Delay != time.Millisecond {
		t.Errorf("first system retry waits %v", r.Delay)
	}
}

func TestPolicyFor(t *testing.T) {
	f := 2.0
	md := &core.TaskMetadata{Retries: &core.RetryStrategy{
		Retries: 4,
		Backoff: &core.Backoff{Base: durationpb.New(time.Second), Factor: &f, Cap: durationpb.New(time.Minute)},
	}}
	got := PolicyFor(md, DefaultMaxSystemRetries)
	want := Policy{MaxUserRetries: 4, MaxSystemRetries: 3, UserBackoff: Backoff{Base: time.Second, Factor: 2, Cap: time.Minute}}
	if got != want {
		t.Errorf("policy %+v, want %+v", got, want)
	}
	if got := PolicyFor(nil, 1); got != (Policy{MaxSystemRetries: 1}) {
		t.Errorf("nil metadata: %+v", got)
	}
}

// A system failure that is not retried says why: its cause alone (a restart,
// a launch failure) would read as if it were.
func TestSpentSystemBudgetIsExplained(t *testing.T) {
	_, d, err := Transition(st(phase.Running, 2, 0, 1), Orphaned{Message: "the manager restarted"}, Policy{MaxSystemRetries: 1})
	term, ok := d.(*Terminal)
	if err != nil || !ok || term.Phase != phase.Failed ||
		term.Error.Message != "the manager restarted (not retried: the system retry budget is spent, 1 of 1 used)" {
		t.Fatalf("%v %+v %v", d, term, err)
	}
}
