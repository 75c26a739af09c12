package appruntime

import (
	"sync"
	"time"

	pb "fmgr.dev/gen/go/flyteidl2/app"
)

// What an app's spec says about scaling, read the same way by every
// runtime, with the defaults for what it leaves open.

const (
	DefaultScaledownAfter = 60 * time.Second
	// DefaultConcurrency is the in-flight requests per replica above which
	// another replica starts, when the spec names no target.
	DefaultConcurrency = 100
	// DefaultRequestTimeout bounds a request's wait for a replica to
	// become ready when the spec names no request timeout.
	DefaultRequestTimeout = 5 * time.Minute
)

// ReplicaBounds are the spec's minimum and maximum replicas: 0 and 1 when
// it names none (the SDK's default Scaling), the maximum at least 1 and
// at least the minimum.
func ReplicaBounds(s *pb.Spec) (min, max int) {
	r := s.GetAutoscaling().GetReplicas()
	min, max = int(r.GetMin()), int(r.GetMax())
	if r == nil {
		min, max = 0, 1
	}
	if max < min {
		max = min
	}
	if max == 0 {
		max = 1
	}
	return min, max
}

// InitialReplicas is how many replicas a revision starts with: its
// minimum, and at least one, so that a broken app shows at once.
func InitialReplicas(s *pb.Spec) int {
	min, _ := ReplicaBounds(s)
	return max(min, 1)
}

// ScaledownAfter is how long an app goes without a request before it
// scales down to its minimum.
func ScaledownAfter(s *pb.Spec) time.Duration {
	if d := s.GetAutoscaling().GetScaledownPeriod(); d != nil && d.AsDuration() > 0 {
		return d.AsDuration()
	}
	return DefaultScaledownAfter
}

// ConcurrencyTarget is the requests in flight per replica above which the
// app scales up.
func ConcurrencyTarget(s *pb.Spec) int {
	m := s.GetAutoscaling().GetScalingMetric()
	if c := m.GetConcurrency(); c != nil && c.GetTargetValue() > 0 {
		return int(c.GetTargetValue())
	}
	return DefaultConcurrency
}

// RequestTimeout bounds how long a request waits for a ready replica.
func RequestTimeout(s *pb.Spec) time.Duration {
	if d := s.GetTimeouts().GetRequestTimeout(); d != nil && d.AsDuration() > 0 {
		return d.AsDuration()
	}
	return DefaultRequestTimeout
}

// Scale is the replica count decision both runtimes make, from what the
// proxy tells them (Served.Begin, Served.Wake) and what serves.
type Scale struct {
	// Want is how many replicas should run now.
	Want int
	// EverReady: a replica of the current revision became ready (idle
	// time counts only then).
	EverReady bool
	// LastRequest is when the last request arrived or ended; Inflight
	// counts requests in flight, Waiting those waiting for a replica.
	LastRequest       time.Time
	Inflight, Waiting int
}

// Begin counts a request in flight until end; mu is the lock that guards
// sc (the runtime's), not held by the caller.
func (sc *Scale) Begin(mu sync.Locker) (end func()) {
	mu.Lock()
	defer mu.Unlock()
	sc.LastRequest = time.Now()
	sc.Inflight++
	return func() {
		mu.Lock()
		defer mu.Unlock()
		sc.Inflight--
		sc.LastRequest = time.Now()
	}
}

// Wait counts a request waiting for a replica until done; mu as for
// Begin.
func (sc *Scale) Wait(mu sync.Locker) (done func()) {
	mu.Lock()
	defer mu.Unlock()
	sc.Waiting++
	return func() {
		mu.Lock()
		defer mu.Unlock()
		sc.Waiting--
	}
}

// Reset starts the decision over for a new revision of s.
func (sc *Scale) Reset(s *pb.Spec, now time.Time) {
	sc.Want, sc.EverReady, sc.LastRequest = InitialReplicas(s), false, now
}

// Decide updates Want: one up when the ready replicas carry more than
// their target, down to the minimum after ScaledownAfter without a
// request, one up from zero for a request that waits; within the bounds.
func (sc *Scale) Decide(s *pb.Spec, ready int, now time.Time) int {
	min, max := ReplicaBounds(s)
	if ready > 0 && sc.Inflight > ConcurrencyTarget(s)*ready && sc.Want < max {
		sc.Want++
	}
	if sc.Want > min && sc.EverReady && sc.Inflight == 0 && now.Sub(sc.LastRequest) >= ScaledownAfter(s) {
		sc.Want = min
	}
	if sc.Want == 0 && sc.Waiting > 0 {
		sc.Want = 1
	}
	sc.Want = clamp(sc.Want, min, max)
	return sc.Want
}

func clamp(n, lo, hi int) int { return max(lo, min(n, hi)) }
