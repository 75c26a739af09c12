package schedule

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/errs"
)

func cronSpec(expr, tz string) *task.TriggerAutomationSpec {
	return &task.TriggerAutomationSpec{
		Type: task.TriggerAutomationSpecType_TYPE_SCHEDULE,
		Automation: &task.TriggerAutomationSpec_Schedule{Schedule: &task.Schedule{
			Expression: &task.Schedule_Cron{Cron: &task.Cron{Expression: expr, Timezone: tz}},
		}},
	}
}

func rateSpec(minutes uint32, start *time.Time) *task.TriggerAutomationSpec {
	r := &task.FixedRate{Value: minutes, Unit: task.FixedRateUnit_FIXED_RATE_UNIT_MINUTE}
	if start != nil {
		r.StartTime = timestamppb.New(*start)
	}
	return &task.TriggerAutomationSpec{
		Type:       task.TriggerAutomationSpecType_TYPE_SCHEDULE,
		Automation: &task.TriggerAutomationSpec_Schedule{Schedule: &task.Schedule{Expression: &task.Schedule_Rate{Rate: r}}},
	}
}

func mustParse(t *testing.T, a *task.TriggerAutomationSpec) Schedule {
	t.Helper()
	s, err := Parse("automation_spec", a, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestCronTimeZone(t *testing.T) {
	// 09:00 in New York is 14:00 UTC in winter and 13:00 UTC in summer.
	s := mustParse(t, cronSpec("0 9 * * *", "America/New_York"))
	if got, want := s.Next(at("2026-01-10T15:00:00Z"), time.Time{}), at("2026-01-11T14:00:00Z"); !got.Equal(want) {
		t.Errorf("winter: next %s, want %s", got, want)
	}
	if got, want := s.Next(at("2026-07-10T15:00:00Z"), time.Time{}), at("2026-07-11T13:00:00Z"); !got.Equal(want) {
		t.Errorf("summer: next %s, want %s", got, want)
	}
	if got := s.Next(at("2026-01-10T15:00:00Z"), time.Time{}); got.Location() != time.UTC {
		t.Errorf("next is in %s, want UTC", got.Location())
	}
	// No time zone is UTC.
	u := mustParse(t, cronSpec("*/5 * * * *", ""))
	if got, want := u.Next(at("2026-03-01T10:02:00Z"), time.Time{}), at("2026-03-01T10:05:00Z"); !got.Equal(want) {
		t.Errorf("utc: next %s, want %s", got, want)
	}
}

func TestCronDST(t *testing.T) {
	// Europe/Berlin springs forward on 2026-03-29 (02:00 → 03:00) and falls
	// back on 2026-10-25 (03:00 → 02:00).
	s := mustParse(t, cronSpec("30 2 * * *", "Europe/Berlin"))
	// 02:30 does not exist on the 29th: that day has no firing.
	got := s.Next(at("2026-03-28T02:00:00Z"), time.Time{}) // after 03:00 Berlin on the 28th
	if want := at("2026-03-30T00:30:00Z"); !got.Equal(want) {
		t.Errorf("spring forward: next %s, want %s (the skipped day has none)", got, want)
	}
	// 02:30 happens twice on 25 October: it fires once.
	first := s.Next(at("2026-10-24T12:00:00Z"), time.Time{})
	second := s.Next(first, time.Time{})
	if want := at("2026-10-25T00:30:00Z"); !first.Equal(want) {
		t.Errorf("fall back: first %s, want %s", first, want)
	}
	if second.Sub(first) < 24*time.Hour {
		t.Errorf("fall back: fired twice, at %s and %s", first, second)
	}
}

func TestFixedRate(t *testing.T) {
	anchor := at("2026-05-01T12:00:00Z")
	s := mustParse(t, rateSpec(10, nil))
	// Without a start time the first firing is one interval after the anchor.
	if got, want := s.Next(anchor, anchor), at("2026-05-01T12:10:00Z"); !got.Equal(want) {
		t.Errorf("first: %s, want %s", got, want)
	}
	if got, want := s.Next(at("2026-05-01T12:10:00Z"), anchor), at("2026-05-01T12:20:00Z"); !got.Equal(want) {
		t.Errorf("tick: %s, want %s", got, want)
	}
	if got, want := s.Next(at("2026-05-01T12:25:03Z"), anchor), at("2026-05-01T12:30:00Z"); !got.Equal(want) {
		t.Errorf("between ticks: %s, want %s", got, want)
	}
	// A start time fixes the ticks whatever the anchor.
	start := at("2026-05-01T08:03:00Z")
	st := mustParse(t, rateSpec(60, &start))
	if got, want := st.Next(anchor, anchor), at("2026-05-01T12:03:00Z"); !got.Equal(want) {
		t.Errorf("start time: %s, want %s", got, want)
	}
	if got := st.Next(at("2026-05-01T07:00:00Z"), anchor); !got.Equal(start) {
		t.Errorf("before start: %s, want the start %s", got, start)
	}
	// A shortened minute (tests) scales the interval.
	short, err := Parse("a", rateSpec(2, nil), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := short.Next(anchor, anchor), anchor.Add(2*time.Second); !got.Equal(want) {
		t.Errorf("short minute: %s, want %s", got, want)
	}
}

func TestDueAndCatchUp(t *testing.T) {
	anchor := at("2026-05-01T12:00:00Z")
	s := mustParse(t, rateSpec(1, nil))
	// A deploy does not fire at once: nothing is due at the anchor.
	if fire, _ := Due(s, anchor, time.Time{}, anchor.Add(59*time.Second), All, 100); len(fire) != 0 {
		t.Errorf("due before the first interval: %v", fire)
	}
	// On time: the one firing.
	fire, skipped := Due(s, anchor, time.Time{}, anchor.Add(61*time.Second), All, 100)
	if len(fire) != 1 || !fire[0].Equal(anchor.Add(time.Minute)) || skipped != 0 {
		t.Errorf("on time: %v skipped %d", fire, skipped)
	}
	// Made already: nothing again.
	if fire, _ := Due(s, anchor, anchor.Add(time.Minute), anchor.Add(61*time.Second), All, 100); len(fire) != 0 {
		t.Errorf("fired twice: %v", fire)
	}
	// Ten minutes down after the first firing: all nine missed and the
	// current one, oldest first.
	now := anchor.Add(11*time.Minute + time.Second)
	fire, skipped = Due(s, anchor, anchor.Add(time.Minute), now, All, 100)
	if len(fire) != 10 || skipped != 0 || !fire[0].Equal(anchor.Add(2*time.Minute)) || !fire[9].Equal(anchor.Add(11*time.Minute)) {
		t.Errorf("catch up all: %v skipped %d", fire, skipped)
	}
	// The cap keeps the newest.
	fire, skipped = Due(s, anchor, anchor.Add(time.Minute), now, All, 3)
	if len(fire) != 3 || skipped != 7 || !fire[0].Equal(anchor.Add(9*time.Minute)) {
		t.Errorf("cap 3: %v skipped %d", fire, skipped)
	}
	// Latest: only the newest.
	fire, skipped = Due(s, anchor, anchor.Add(time.Minute), now, Latest, 100)
	if len(fire) != 1 || skipped != 9 || !fire[0].Equal(anchor.Add(11*time.Minute)) {
		t.Errorf("latest: %v skipped %d", fire, skipped)
	}
	// A cron catches up on its own ticks.
	c := mustParse(t, cronSpec("0 * * * *", "UTC"))
	fire, _ = Due(c, anchor, anchor, anchor.Add(3*time.Hour+time.Minute), All, 100)
	if len(fire) != 3 || !fire[0].Equal(at("2026-05-01T13:00:00Z")) {
		t.Errorf("cron catch up: %v", fire)
	}
}

func TestParseRefuses(t *testing.T) {
	for name, a := range map[string]*task.TriggerAutomationSpec{
		"bad cron":       cronSpec("61 * * * *", "UTC"),
		"six fields":     cronSpec("0 0 * * * *", "UTC"),
		"bad zone":       cronSpec("0 * * * *", "Mars/Olympus"),
		"zero rate":      rateSpec(0, nil),
		"no expression":  {Type: task.TriggerAutomationSpecType_TYPE_SCHEDULE, Automation: &task.TriggerAutomationSpec_Schedule{Schedule: &task.Schedule{}}},
		"artifact":       {Type: task.TriggerAutomationSpecType_TYPE_ARTIFACT},
		"none with rate": {Type: task.TriggerAutomationSpecType_TYPE_NONE, Automation: rateSpec(1, nil).Automation},
	} {
		if _, err := Parse("automation_spec", a, time.Minute); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("%s: err %v, want invalid argument", name, err)
		}
	}
	s, err := Parse("automation_spec", &task.TriggerAutomationSpec{Type: task.TriggerAutomationSpecType_TYPE_NONE}, time.Minute)
	if s != nil || err != nil {
		t.Errorf("TYPE_NONE: %v, %v; want no schedule and no error", s, err)
	}
}

// Upcoming is the firing Due makes next: one interval after activation
// until the trigger fires, then one after its last firing.
func TestUpcoming(t *testing.T) {
	anchor := time.Date(2026, 3, 1, 10, 0, 30, 0, time.UTC)
	s := mustParse(t, rateSpec(5, nil))
	if got, want := Upcoming(s, anchor, time.Time{}), anchor.Add(5*time.Minute); !got.Equal(want) {
		t.Errorf("before any firing: %s, want %s", got, want)
	}
	last := anchor.Add(15 * time.Minute)
	if got, want := Upcoming(s, anchor, last), anchor.Add(20*time.Minute); !got.Equal(want) {
		t.Errorf("after the firing at %s: %s, want %s", last, got, want)
	}
	due, _ := Due(s, anchor, last, last.Add(time.Hour), All, 1)
	if len(due) != 1 || due[0].Before(Upcoming(s, anchor, last)) {
		t.Errorf("Due made %v, before the upcoming firing", due)
	}
	c := mustParse(t, cronSpec("0 9 * * *", "Europe/Paris"))
	if got, want := Upcoming(c, anchor, time.Time{}), time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("cron 09:00 Paris after %s: %s, want %s", anchor, got, want)
	}
}
