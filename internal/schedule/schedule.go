// Package schedule is the time arithmetic of triggers: when a trigger's
// automation fires, which firings are due at a moment, and which of the
// firings missed while no manager ran are still made (the catch-up
// policy). It is pure: every function takes the times it works on, so the
// tests drive it with an injected clock.
package schedule

import (
	"fmt"
	"slices"
	"time"
	_ "time/tzdata" // cron time zones on hosts without a zoneinfo database

	"github.com/robfig/cron/v3"

	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/errs"
)

// Schedule is when a trigger fires.
type Schedule interface {
	// Next is the first firing strictly after t. anchor is when the
	// trigger's current activation began (deployed or activated): a fixed
	// rate without a start time counts its intervals from it; cron ignores
	// it.
	Next(t, anchor time.Time) time.Time
}

// Parse compiles an automation spec. It returns nil and no error for a
// trigger that is never scheduled (TYPE_NONE, or no automation at all), and
// an errs.ErrInvalid naming the field for anything it cannot schedule.
// minute is how long a FixedRate minute lasts: a minute, except where tests
// shorten it.
func Parse(field string, a *task.TriggerAutomationSpec, minute time.Duration) (Schedule, error) {
	switch a.GetType() {
	case task.TriggerAutomationSpecType_TYPE_UNSPECIFIED, task.TriggerAutomationSpecType_TYPE_NONE:
		if a.GetSchedule() != nil || a.GetArtifact() != nil {
			return nil, errs.Invalidf("%s.type %s carries an automation; set type TYPE_SCHEDULE or TYPE_ARTIFACT", field, a.GetType())
		}
		return nil, nil
	case task.TriggerAutomationSpecType_TYPE_SCHEDULE:
	case task.TriggerAutomationSpecType_TYPE_ARTIFACT:
		return nil, errs.Invalidf("%s: artifact triggers are not supported (this manager has no artifact service); use a Cron or FixedRate schedule", field)
	default:
		return nil, errs.Invalidf("%s.type %d is not a known automation type", field, a.GetType())
	}
	s := a.GetSchedule()
	switch {
	case s.GetCron() != nil:
		return parseCron(field+".schedule.cron", s.GetCron().GetExpression(), s.GetCron().GetTimezone())
	case s.GetCronExpression() != "":
		return parseCron(field+".schedule.cron_expression", s.GetCronExpression(), "")
	case s.GetRate() != nil:
		return parseRate(field+".schedule.rate", s.GetRate(), minute)
	}
	return nil, errs.Invalidf("%s.schedule needs a cron or a rate", field)
}

// cronParser reads the standard five fields (and the @hourly-style
// descriptors), as the SDK documents.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

type cronSchedule struct {
	s   cron.Schedule
	loc *time.Location
}

func parseCron(field, expr, tz string) (Schedule, error) {
	if expr == "" {
		return nil, errs.Invalidf("%s.expression is required", field)
	}
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, errs.Invalidf("%s.timezone %q is not a known time zone (use an IANA name such as Europe/London)", field, tz)
	}
	s, err := cronParser.Parse(expr)
	if err != nil {
		return nil, errs.Invalidf("%s.expression %q is not a five-field cron expression: %v", field, expr, err)
	}
	return cronSchedule{s: s, loc: loc}, nil
}

// Next evaluates the expression on the zone's wall clock: across a DST
// change a wall time that does not exist has no firing (robfig/cron's
// rule), and one that occurs twice fires once, the first time.
func (c cronSchedule) Next(t, _ time.Time) time.Time {
	local := t.In(c.loc)
	n := c.s.Next(local)
	for !n.IsZero() && wallClock(n) == wallClock(local) {
		n = c.s.Next(n)
	}
	if n.IsZero() {
		return n
	}
	return n.UTC()
}

// wallClock is a zone's local time to the minute, without its offset.
func wallClock(t time.Time) string { return t.Format("2006-01-02T15:04") }

type rateSchedule struct {
	every time.Duration
	start time.Time // zero: count from the anchor
}

func parseRate(field string, r *task.FixedRate, minute time.Duration) (Schedule, error) {
	if r.GetValue() == 0 {
		return nil, errs.Invalidf("%s.value must be at least 1", field)
	}
	var unit time.Duration
	switch r.GetUnit() {
	case task.FixedRateUnit_FIXED_RATE_UNIT_MINUTE:
		unit = minute
	case task.FixedRateUnit_FIXED_RATE_UNIT_HOUR:
		unit = 60 * minute
	case task.FixedRateUnit_FIXED_RATE_UNIT_DAY:
		unit = 24 * 60 * minute
	default:
		return nil, errs.Invalidf("%s.unit %s is not MINUTE, HOUR or DAY", field, r.GetUnit())
	}
	rs := rateSchedule{every: time.Duration(r.GetValue()) * unit}
	if st := r.GetStartTime(); st != nil {
		if err := st.CheckValid(); err != nil {
			return nil, errs.Invalidf("%s.start_time: %v", field, err)
		}
		rs.start = st.AsTime()
	}
	return rs, nil
}

// Next is the first tick start + k·every (k ≥ 0) after t, where start is
// the rate's start time or, without one, the anchor plus one interval (the
// SDK's "the first trigger occurs interval after deployment/activation").
func (r rateSchedule) Next(t, anchor time.Time) time.Time {
	start := r.start
	if start.IsZero() {
		start = anchor.Add(r.every)
	}
	if t.Before(start) {
		return start.UTC()
	}
	k := t.Sub(start)/r.every + 1
	return start.Add(k * r.every).UTC()
}

// Policy says what happens to firings that were missed, i.e. came due while
// no manager was scheduling (down, or deactivated clocks do not count: a
// deactivated trigger has no firings).
type Policy string

const (
	// All makes every missed firing, oldest first, at most the cap.
	All Policy = "all"
	// Latest makes only the newest missed firing.
	Latest Policy = "latest"
)

// ParsePolicy reads a configured policy.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case All, Latest:
		return p, nil
	}
	return "", fmt.Errorf("unknown catch-up policy %q (want all or latest)", s)
}

// Due lists the firings to make at now, oldest first: those in (from, now],
// where from is the later of the anchor and the last firing made (zero:
// none yet). A firing due now or missed is treated alike; the policy keeps
// all of them or only the newest, and limit caps them (the newest kept).
// skipped counts the firings left out.
func Due(s Schedule, anchor, last, now time.Time, p Policy, limit int) (fire []time.Time, skipped int) {
	from := since(anchor, last)
	if limit < 1 {
		limit = 1
	}
	// Walk at most limit+1 firings past the cap's window: the ones before
	// the newest `limit` are only counted.
	var window []time.Time
	for t := s.Next(from, anchor); !t.IsZero() && !t.After(now); t = s.Next(t, anchor) {
		window = append(window, t)
		if len(window) > limit {
			window = slices.Delete(window, 0, 1)
			skipped++
		}
		if skipped > 1_000_000 {
			// An interval of a few seconds unscheduled for years: jump to
			// the end rather than walk every tick.
			break
		}
	}
	if p == Latest && len(window) > 1 {
		skipped += len(window) - 1
		window = window[len(window)-1:]
	}
	return window, skipped
}

// Upcoming is the trigger's next firing: the first after the later of the
// anchor and the last firing made (zero: none yet). It is what Due makes
// next, so it is in the past when the scheduler is behind (the manager was
// down, or it is about to fire).
func Upcoming(s Schedule, anchor, last time.Time) time.Time {
	return s.Next(since(anchor, last), anchor)
}

// since is where a trigger's firings continue from: its last firing, or
// its activation when it made none since.
func since(anchor, last time.Time) time.Time {
	if last.After(anchor) {
		return last
	}
	return anchor
}
