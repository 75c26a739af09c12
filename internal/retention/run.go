package retention

import (
	"context"
	"time"
)

// noticeRepeat is how often, during the notice, the log says again what
// the collector will delete.
const noticeRepeat = 6 * time.Hour

// Run collects every interval while held reports that this manager holds
// the executor lease, until ctx ends. A failed pass is logged and retried
// at the next interval. During the notice (retention.notice from the first
// pass on this database) passes are dry: they log what will be deleted and
// from when, and delete nothing.
func (c *Collector) Run(ctx context.Context, interval time.Duration, held func() bool) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	var warned time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if !held() {
			continue
		}
		from, err := c.deletesFrom(ctx)
		if err != nil {
			if ctx.Err() == nil {
				c.log.Warn("retention: reading the notice failed (will retry)", "err", err)
			}
			continue
		}
		if now := c.now(); now.Before(from) {
			if now.Sub(warned) < noticeRepeat {
				continue
			}
			warned = now
			if rep, err := c.Collect(ctx, true); err == nil && rep.Runs > 0 {
				c.log.Warn("retention: runs past their retention will be deleted from "+from.Format(time.RFC3339)+
					"; pin those to keep (flyte-manager gc pin) or set retention.default/rules (docs/retention.md)",
					"runs", rep.Runs, "objects", rep.Objects, "bytes", rep.Bytes)
			}
			continue
		}
		rep, err := c.Collect(ctx, false)
		if err != nil && ctx.Err() == nil {
			c.log.Warn("retention: collection failed (will retry)", "err", err)
		}
		if rep.Runs > 0 || rep.Objects > 0 || rep.Dirs > 0 {
			c.log.Info("retention: collected", "runs", rep.Runs, "objects", rep.Objects, "bytes", rep.Bytes,
				"attemptDirs", rep.Dirs, "attemptDirBytes", rep.DirBytes, "bundles", rep.Bundles, "inputs", rep.Inputs)
		}
	}
}

// deletesFrom is when the notice ends: retention.notice after the first
// pass on this database.
func (c *Collector) deletesFrom(ctx context.Context) (time.Time, error) {
	if c.cfg.Notice <= 0 {
		return time.Time{}, nil
	}
	first, err := c.rows.NoticeFrom(ctx, c.now())
	if err != nil {
		return time.Time{}, err
	}
	return first.Add(c.cfg.Notice), nil
}
