package compose

import (
	"log/slog"

	"fmgr.dev/internal/config"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/schedule"
	"fmgr.dev/internal/server"
	"fmgr.dev/internal/store"
	"fmgr.dev/trigger"
)

// setupTriggers mounts TriggerService and starts the scheduler, which
// makes runs through the run state and fires only while this manager's
// executor holds the lease.
func setupTriggers(srv *server.Server, cfg config.Triggers, svc *trigger.Service, st *store.Store, state *runstate.Service, exec executor, log *slog.Logger) error {
	policy, err := schedule.ParsePolicy(cfg.CatchUp)
	if err != nil {
		return err
	}
	sched := trigger.NewScheduler(st, state, exec.LeaseHeld, nil, trigger.SchedulerConfig{
		Interval: cfg.CheckInterval, Minute: cfg.Minute, CatchUp: policy, MaxCatchUp: cfg.MaxCatchUp,
	}, log)
	srv.AddWorker("trigger scheduler", sched.Run)
	return trigger.Setup(srv, svc)
}
