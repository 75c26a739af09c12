package trigger

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/ident"
	"fmgr.dev/internal/schedule"
	"fmgr.dev/internal/store"
)

// RunCreator makes runs: RunService.CreateRun's implementation (the run
// state), which resolves a trigger_name to the trigger's task, inputs and
// run spec.
type RunCreator interface {
	CreateRun(ctx context.Context, req *workflow.CreateRunRequest) (*workflow.Run, error)
}

// SchedulerConfig is the scheduler's part of the configuration.
type SchedulerConfig struct {
	// Interval is how often the due firings are looked for.
	Interval time.Duration
	// Minute is how long a FixedRate minute lasts (a minute; tests
	// shorten it to fire every few seconds).
	Minute time.Duration
	// CatchUp is what happens to firings missed while no manager ran.
	CatchUp schedule.Policy
	// MaxCatchUp caps the firings one trigger makes at once.
	MaxCatchUp int
}

// Scheduler fires the active scheduled triggers. Only the manager that
// leads (holds the executor lease) fires; every firing is a run with a
// name derived from the trigger and its scheduled time, so a firing
// repeated (after a crash, or by two managers during a lease handover)
// finds its run there and makes no second one.
type Scheduler struct {
	triggers *store.Triggers
	runs     RunCreator
	leads    func() bool
	now      func() time.Time
	cfg      SchedulerConfig
	log      *slog.Logger

	mu      sync.Mutex
	backoff map[int64]retry // triggers whose last firing failed for a reason that may pass
}

type retry struct {
	at   time.Time
	wait time.Duration
}

// NewScheduler builds the scheduler. leads reports whether this manager
// fires (nil: always); now is the clock (nil: time.Now).
func NewScheduler(st *store.Store, runs RunCreator, leads func() bool, now func() time.Time, cfg SchedulerConfig, log *slog.Logger) *Scheduler {
	if leads == nil {
		leads = func() bool { return true }
	}
	if now == nil {
		now = time.Now
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Minute <= 0 {
		cfg.Minute = time.Minute
	}
	if cfg.CatchUp == "" {
		cfg.CatchUp = schedule.All
	}
	if cfg.MaxCatchUp <= 0 {
		cfg.MaxCatchUp = 100
	}
	if log == nil {
		log = slog.Default()
	}
	return &Scheduler{triggers: st.Triggers, runs: runs, leads: leads, now: now, cfg: cfg, log: log, backoff: map[int64]retry{}}
}

// Run passes over the triggers every interval until ctx ends.
func (s *Scheduler) Run(ctx context.Context) error {
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if !s.leads() {
			continue
		}
		if err := s.Pass(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("trigger scheduler: pass failed (will retry)", "err", err)
		}
	}
}

// Pass makes every firing due now: for each active scheduled trigger, the
// firings after its last one up to now, as the catch-up policy allows.
func (s *Scheduler) Pass(ctx context.Context) error {
	rows, err := s.triggers.Scheduled(ctx)
	if err != nil {
		return err
	}
	now := s.now().UTC()
	for i := range rows {
		if ctx.Err() != nil {
			return nil
		}
		s.fireDue(ctx, &rows[i], now)
	}
	return nil
}

func (s *Scheduler) fireDue(ctx context.Context, t *store.Trigger, now time.Time) {
	s.mu.Lock()
	r, waiting := s.backoff[t.ID]
	s.mu.Unlock()
	if waiting && now.Before(r.at) {
		return
	}
	d, err := decode(t)
	if err != nil {
		s.log.Error("trigger scheduler: unreadable trigger, not fired", "trigger", t.TriggerKey.String(), "err", err)
		return
	}
	sched, err := schedule.Parse("automation_spec", d.automation, s.cfg.Minute)
	if err != nil || sched == nil {
		s.log.Error("trigger scheduler: trigger has no schedule it can run, not fired", "trigger", t.TriggerKey.String(), "err", err)
		return
	}
	var last time.Time
	if t.LastSlot != nil {
		last = *t.LastSlot
	}
	due, skipped := schedule.Due(sched, t.ActiveSince, last, now, s.cfg.CatchUp, s.cfg.MaxCatchUp)
	if skipped > 0 {
		s.log.Warn("trigger scheduler: missed firings left out", "trigger", t.TriggerKey.String(), "skipped", skipped,
			"policy", string(s.cfg.CatchUp), "maxCatchUp", s.cfg.MaxCatchUp)
	}
	for _, slot := range due {
		if err := s.fire(ctx, t, slot); err != nil {
			s.failed(t, slot, now, err)
			return
		}
	}
	if waiting {
		s.mu.Lock()
		delete(s.backoff, t.ID)
		s.mu.Unlock()
	}
}

// RunName is the name of the run trigger k makes for its firing at slot:
// 'r' and 16 hex digits of a hash of both, so a firing made twice names
// the same run.
func RunName(k store.TriggerKey, slot time.Time) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s:%s:%s:%s:%s:%s", k.Org, k.Project, k.Domain, k.TaskName, k.Name, slot.UTC().Format(time.RFC3339Nano))
	return fmt.Sprintf("r%016x", h.Sum64())
}

// fire makes the run of one firing. A run already there is that firing,
// made before: it is recorded (again) and counts as made.
func (s *Scheduler) fire(ctx context.Context, t *store.Trigger, slot time.Time) error {
	run := store.RunKey{Org: t.TriggerKey.Org, Project: t.TriggerKey.Project, Domain: t.TriggerKey.Domain, RunName: RunName(t.TriggerKey, slot)}
	_, err := s.runs.CreateRun(ctx, &workflow.CreateRunRequest{
		Id:           &workflow.CreateRunRequest_RunId{RunId: ident.RunProto(run)},
		Task:         &workflow.CreateRunRequest_TriggerName{TriggerName: ident.TriggerProto(t.TriggerKey)},
		Source:       workflow.RunSource_RUN_SOURCE_SCHEDULE_TRIGGER,
		RunStartTime: timestamppb.New(slot),
	})
	switch {
	case err == nil:
		s.log.Info("trigger fired", "trigger", t.TriggerKey.String(), "scheduled", slot, "run", run.RunName)
	case errors.Is(err, errs.ErrAlreadyExists):
		s.log.Info("trigger firing found made already", "trigger", t.TriggerKey.String(), "scheduled", slot, "run", run.RunName)
	default:
		return err
	}
	return s.triggers.RecordRun(ctx, t, run, &slot)
}

// failed decides about a firing that made no run. A refusal that will not
// pass by itself (the task's code is gone, the project is archived, the
// trigger changed meanwhile) skips that firing, loudly; anything else
// (the database or storage unreachable) is retried with a growing wait.
func (s *Scheduler) failed(t *store.Trigger, slot, now time.Time, err error) {
	permanent := errors.Is(err, errs.ErrInvalid) || errors.Is(err, errs.ErrNotFound) || errors.Is(err, errs.ErrPrecondition) ||
		errors.Is(err, errs.ErrTooLarge)
	if permanent {
		s.log.Error("trigger firing refused; skipping it", "trigger", t.TriggerKey.String(), "scheduled", slot, "err", err)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.triggers.SkipSlot(ctx, t.ID, slot); err != nil {
			s.log.Warn("trigger scheduler: recording a skipped firing", "trigger", t.TriggerKey.String(), "err", err)
		}
		return
	}
	s.mu.Lock()
	r := s.backoff[t.ID]
	r.wait = min(max(2*r.wait, s.cfg.Interval), time.Minute)
	r.at = now.Add(r.wait)
	s.backoff[t.ID] = r
	s.mu.Unlock()
	s.log.Warn("trigger firing failed (will retry)", "trigger", t.TriggerKey.String(), "scheduled", slot, "retryIn", r.wait, "err", err)
}
