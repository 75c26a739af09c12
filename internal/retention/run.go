package retention

import (
	"context"
	"time"
)

// Run collects every interval while held reports that this manager holds
// the executor lease, until ctx ends. A failed pass is logged and retried
// at the next interval.
func (c *Collector) Run(ctx context.Context, interval time.Duration, held func() bool) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if !held() {
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
