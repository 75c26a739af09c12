package compose

import (
	"context"
	"log/slog"
	"time"

	"fmgr.dev/executor/local"
	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/retention"
	"fmgr.dev/internal/server"
	"fmgr.dev/internal/store"
)

// diskMeasureEvery is how often the attempt directories are measured
// against retention.diskCap.
const diskMeasureEvery = time.Minute

// NewCollector builds the retention collector of cfg over st and blobs;
// with the local executor it removes attempt directories from its work dir.
func NewCollector(cfg *config.Config, st *store.Store, blobs *blob.Store, log *slog.Logger) *retention.Collector {
	var runDir func(store.RunKey) (string, error)
	if cfg.Executor.Type == config.ExecutorLocal && cfg.Executor.Local.WorkDir != "" {
		workDir := cfg.Executor.Local.WorkDir
		runDir = func(k store.RunKey) (string, error) { return local.RunDir(workDir, k) }
	}
	return retention.New(st, blobs, cfg.Retention, runDir, log)
}

// setupRetention registers the periodic collector, which collects only
// while this manager holds the executor lease, its metrics, and with a
// disk cap the measure of the attempt directories that /readyz reports
// once it passes 90% of the cap.
func setupRetention(srv *server.Server, cfg *config.Config, st *store.Store, blobs *blob.Store, exec executor, log *slog.Logger) error {
	c := NewCollector(cfg, st, blobs, log)
	for _, m := range c.Collectors() {
		if err := srv.Registry().Register(m); err != nil {
			return err
		}
	}
	if every := cfg.Retention.Interval; every > 0 {
		srv.AddWorker("retention collector", func(ctx context.Context) error { return c.Run(ctx, every, exec.LeaseHeld) })
	}
	if cfg.Retention.DiskCap > 0 && cfg.Executor.Type == config.ExecutorLocal {
		disk := retention.NewDisk(cfg.Executor.Local.WorkDir, cfg.Retention.DiskCap)
		if err := srv.Registry().Register(disk.Collector()); err != nil {
			return err
		}
		srv.AddWorker("attempt directory measure", func(ctx context.Context) error { return disk.Run(ctx, diskMeasureEvery) })
		srv.AddReadinessCheck("disk", func(context.Context) error {
			if s := disk.Near(); s != "" {
				return server.Detail(s)
			}
			return nil
		})
	}
	return nil
}
